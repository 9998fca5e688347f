package symbolize

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"

	"github.com/jitprof/jitprof/internal/dumpindex"
	"github.com/jitprof/jitprof/internal/jitsources"
	"github.com/jitprof/jitprof/internal/unwind"
	"github.com/jitprof/jitprof/jitdump"
)

// The instructions of HotSpot's compiled code the rules are read from, as
// HotSpot 17 writes them (checked against objdump of a dump's code).
var (
	bang       = []byte{0x89, 0x84, 0x24, 0x00, 0xc0, 0xfe, 0xff} // mov %eax,-0x14000(%rsp)
	pushRBP    = []byte{0x55}
	movRSPRBP  = []byte{0x48, 0x89, 0xe5}       // mov %rsp,%rbp
	sub8       = []byte{0x48, 0x83, 0xec, 0x30} // sub $0x30,%rsp
	sub32      = []byte{0x48, 0x81, 0xec, 0x80, 0x00, 0x00, 0x00}
	add8       = []byte{0x48, 0x83, 0xc4, 0x30} // add $0x30,%rsp
	add32      = []byte{0x48, 0x81, 0xc4, 0x80, 0x00, 0x00, 0x00}
	popRBP     = []byte{0x5d}
	leave      = []byte{0xc9}
	ret        = []byte{0xc3}
	poll       = []byte{0x49, 0x3b, 0xa7, 0x20, 0x03, 0x00, 0x00, 0x0f, 0x87, 0x10, 0x00, 0x00, 0x00} // cmp 0x320(%r15),%rsp; ja
	body       = []byte{0x8b, 0xee, 0xff, 0xcd, 0x83, 0xfd, 0x02}                                     // mov %esi,%ebp; dec %ebp; cmp $2,%ebp
	call       = []byte{0xe8, 0x00, 0x00, 0x00, 0x00}
	notEntrant = []byte{0xe9, 0x7b, 0x78, 0x58, 0x07} // jmp rel32 over the entry's first 5 bytes
	// The inline cache check before an instance method's verified entry.
	uep = []byte{0x44, 0x8b, 0x56, 0x08, 0x49, 0xc1, 0xe2, 0x03, 0x49, 0x3b, 0xc2, 0x0f, 0x85, 0x00, 0x00, 0x00, 0x00,
		0x66, 0x90, 0x66, 0x90, 0x66, 0x90, 0x66, 0x90, 0x66, 0x90, 0x66, 0x90, 0x66, 0x90, 0x90}
	// C2 without a bang: sub $0x18,%rsp (the immediate always 4 bytes); mov %rbp,0x10(%rsp)
	noBangSub = []byte{0x48, 0x81, 0xec, 0x18, 0x00, 0x00, 0x00}
	noBangMov = []byte{0x48, 0x89, 0x6c, 0x24, 0x10}
	// A runtime stub's: sub $0x8,%rsp; mov %rbp,(%rsp)
	stubSub = []byte{0x48, 0x81, 0xec, 0x08, 0x00, 0x00, 0x00}
	stubMov = []byte{0x48, 0x89, 0x2c, 0x24}
	addStub = []byte{0x48, 0x83, 0xc4, 0x08}
)

func cat(parts ...[]byte) []byte {
	var b []byte
	for _, p := range parts {
		b = append(b, p...)
	}
	return b
}

func at(parts ...[]byte) int { return len(cat(parts...)) }

func sp(cfa int32) unwind.Rule { return unwind.Rule{Kind: unwind.KindSP, CFAOff: cfa, RAOff: -8} }
func spSaved(cfa int32) unwind.Rule {
	return unwind.Rule{Kind: unwind.KindSP, CFAOff: cfa, RAOff: -8, FPOff: -16}
}

type want struct {
	off  int
	rule unwind.Rule
}

func TestHotspotFrame(t *testing.T) {
	// A C2 static method with a 0x40-byte frame: 0x30 below rbp.
	c2 := cat(bang, pushRBP, sub8, body, add8, popRBP, poll, ret, body)
	// C1's, an instance method: the check, then 0x90 bytes.
	c1 := cat(uep, bang, pushRBP, sub32, body, call, body, add32, popRBP, ret)
	cases := []struct {
		name string
		fn   string
		code []byte
		want []want // nil: no rules
	}{
		{"C2, bang", "LWork;fib(I)J", c2, []want{
			{0, sp(8)},
			{at(bang), sp(8)},
			{at(bang, pushRBP), spSaved(16)},
			{at(bang, pushRBP, sub8), spSaved(0x40)},
			{at(bang, pushRBP, sub8, body) + 3, spSaved(0x40)},
			{at(bang, pushRBP, sub8, body, add8), spSaved(16)},
			{at(bang, pushRBP, sub8, body, add8, popRBP), sp(8)},
			{at(bang, pushRBP, sub8, body, add8, popRBP, poll), sp(8)},
			{at(bang, pushRBP, sub8, body, add8, popRBP, poll, ret), spSaved(0x40)},
			{len(c2) - 1, spSaved(0x40)},
		}},
		{"C1, after the inline cache check", "LWork;run()V", c1, []want{
			{0, sp(8)},
			{at(uep) + 3, sp(8)},
			{at(uep, bang, pushRBP), spSaved(16)},
			{at(uep, bang, pushRBP, sub32), spSaved(0x90)},
			{at(uep, bang, pushRBP, sub32, body, call), spSaved(0x90)},
			{at(uep, bang, pushRBP, sub32, body, call, body, add32), spSaved(16)},
			{at(uep, bang, pushRBP, sub32, body, call, body, add32, popRBP), sp(8)},
		}},
		{"OSR: a trap at the verified entry, the frame at the OSR entry", "LWork;main([Ljava/lang/String;)V",
			cat(call, []byte{0x66, 0x66, 0x66, 0x0f, 0x1f, 0x84, 0, 0, 0, 0, 0}, bang, pushRBP, sub32, body), []want{
				{0, sp(8)},
				{16 + at(bang, pushRBP, sub32), spSaved(0x90)},
			}},
		{"made not entrant", "LWork;fib(I)J", cat(notEntrant, bang[5:], pushRBP, sub8, body, add8, popRBP, ret), []want{
			{at(bang, pushRBP), spSaved(16)},
			{at(bang, pushRBP, sub8), spSaved(0x40)},
			{at(bang, pushRBP, sub8, body, add8, popRBP), sp(8)},
		}},
		{"a frame of rbp and the return address", "LWork;id(I)I", cat(bang, pushRBP, body, popRBP, ret, body), []want{
			{at(bang, pushRBP), spSaved(16)},
			{at(bang, pushRBP, body), spSaved(16)},
			{at(bang, pushRBP, body, popRBP), sp(8)},
			{at(bang, pushRBP, body, popRBP, ret), spSaved(16)},
		}},
		{"C2 without a bang", "LWork;leaf(J)J", cat(noBangSub, noBangMov, body, add8[:3], []byte{0x10}, popRBP, ret), []want{
			{0, sp(8)},
			{at(noBangSub), sp(0x20)},
			{at(noBangSub, noBangMov), spSaved(0x20)},
			{at(noBangSub, noBangMov, body), spSaved(0x20)},
			{at(noBangSub, noBangMov, body) + 4, spSaved(16)},
			{at(noBangSub, noBangMov, body) + 5, sp(8)},
		}},
		{"runtime stub", "_new_instance_Java", cat(stubSub, stubMov, call, addStub[:0], popRBP, ret), []want{
			{at(stubSub), sp(16)},
			{at(stubSub, stubMov), spSaved(16)},
			{at(stubSub, stubMov, call), spSaved(16)},
			{at(stubSub, stubMov, call, popRBP), sp(8)},
		}},
		{"frame kept by rbp (native wrapper, PreserveFramePointer)", "LWork;nat()V",
			cat(bang, pushRBP, movRSPRBP, sub8, body, add8, body, leave, ret, body), []want{
				{at(bang, pushRBP), spSaved(16)},
				{at(bang, pushRBP, movRSPRBP, sub8), hotspotFP},
				{at(bang, pushRBP, movRSPRBP, sub8, body, add8), hotspotFP}, // add leaves rbp the frame's
				{at(bang, pushRBP, movRSPRBP, sub8, body, add8, body, leave), sp(8)},
				{at(bang, pushRBP, movRSPRBP, sub8, body, add8, body, leave, ret), hotspotFP},
			}},
		{"method handle intrinsic: no frame", "Ljava/lang/invoke/MethodHandle;linkToStatic(Ljava/lang/Object;Ljava/lang/invoke/MemberName;)Ljava/lang/Object;",
			[]byte{0x48, 0x8b, 0x5b, 0x10, 0xff, 0x63, 0x40}, []want{{0, sp(8)}, {6, sp(8)}}},
		{"itable stub", "itable stub", []byte{0x4c, 0x8b, 0x70, 0x08, 0xff, 0x63, 0x40}, []want{{3, sp(8)}}},
		{"a bang reaching above rsp is not one", "LWork;fib(I)J", cat([]byte{0x89, 0x84, 0x24, 0x00, 0x10, 0x00, 0x00}, pushRBP, sub8, body), nil},
		{"sub and mov disagreeing", "LWork;fib(I)J", cat(noBangSub, []byte{0x48, 0x89, 0x6c, 0x24, 0x20}, body), nil},
		// sub $0x80000000,%rsp; mov %rbp,0x7ffffff8(%rsp): disp+8 wraps as
		// the immediate does, to a frame of -2^31+8 bytes.
		{"a frame too large for an int32", "LWork;fib(I)J",
			cat([]byte{0x48, 0x81, 0xec, 0x00, 0x00, 0x00, 0x80}, []byte{0x48, 0x89, 0xac, 0x24, 0xf8, 0xff, 0xff, 0x7f}, body, popRBP, ret), nil},
		{"no entry in the first 128 bytes", "LWork;fib(I)J", cat(make([]byte, 130), bang, pushRBP, sub8), nil},
		{"a JIT other than HotSpot", "fib", c2, nil},
		{"a stub of another kind", "StubRoutines (1)", c2, nil},
		{"no code in the dump", "LWork;fib(I)J", nil, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var h hotspotFrames
			fn := dumpindex.NewCode(&jitdump.CodeLoad{Name: c.fn, Code: c.code, CodeSize: uint64(len(c.code))})
			if c.want == nil {
				for off := range max(len(c.code), 1) {
					if r, ok := h.rule(fn, uint64(off)); ok {
						t.Fatalf("a rule at %d: %v, want none", off, r)
					}
				}
				return
			}
			for _, w := range c.want {
				if r, ok := h.rule(fn, uint64(w.off)); !ok || r != w.rule {
					t.Errorf("at %d: %v %v, want %v", w.off, r, ok, w.rule)
				}
			}
			if r, ok := h.rule(fn, uint64(len(c.code))); ok {
				t.Errorf("past the code: %v", r)
			}
		})
	}
}

// The interpreter steps by the caller's stack pointer it saved, whatever
// its code.
func TestHotspotInterpreterRule(t *testing.T) {
	var h hotspotFrames
	fn := &dumpindex.Code{Name: "Interpreter", CodeSize: 0x17000}
	r, ok := h.rule(fn, 0x1234)
	if !ok || r != (unwind.Rule{Kind: unwind.KindSavedSP, CFAOff: -8}) {
		t.Errorf("Interpreter: %v %v", r, ok)
	}
}

// TestInterpreted: an interpreter frame is named as the method whose
// Method* it holds at fp-24, by the dump's records at the sample's time.
func TestInterpreted(t *testing.T) {
	path := filepath.Join(t.TempDir(), "jit-1.dump")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w, err := jitdump.NewWriter(f, jitdump.Header{})
	if err != nil {
		t.Fatal(err)
	}
	w.WriteRecord(&jitdump.MethodNames{RecordHeader: jitdump.RecordHeader{Timestamp: 100}, Class: "LWork;",
		Methods: []uint64{0x7f00_0000_1000}, Names: []string{"fib(I)J"}})
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	d, err := dumpindex.Read(path)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	m := &Module{Name: path, Kind: JIT, Dump: &jitsources.Dump{Dump: d}}
	interp := Frame{Addr: 0x5000, Module: m, Symbol: Symbol{Name: "Interpreter", Start: 0x4000, End: 0x9000,
		JIT: &dumpindex.Code{Name: "Interpreter"}}}
	const sp = 0x7ffc_0000_0000
	stack := make([]byte, 0x100)
	binary.LittleEndian.PutUint64(stack[0x40-24:], 0x7f00_0000_1000)
	var s Space
	for _, c := range []struct {
		name  string
		fr    Frame
		t, fp uint64
		stack []byte
		want  string
	}{
		{"named", interp, 150, sp + 0x40, stack, "LWork;fib(I)J [interpreted]"},
		{"before the record", interp, 99, sp + 0x40, stack, ""},
		{"a slot holding no known Method*", interp, 150, sp + 0x48, stack, ""},
		{"slot below the stack pointer", interp, 150, sp + 0x10, stack, ""},
		{"slot past the copy", interp, 150, sp + 0x40, stack[:0x40-24+7], ""},
		{"frame pointer 0", interp, 150, 0, stack, ""},
		{"not the interpreter", func() Frame { f := interp; f.Symbol.Name = "call_stub"; return f }(), 150, sp + 0x40, stack, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, ok := s.Interpreted(c.fr, c.t, c.fp, sp, c.stack)
			if ok != (c.want != "") || ok && got.Symbol.Name != c.want {
				t.Errorf("Interpreted: %q %v, want %q", got.Symbol.Name, ok, c.want)
			}
			if ok && (got.Symbol.Start != c.fr.Symbol.Start || got.Module != m || got.Addr != c.fr.Addr) {
				t.Errorf("Interpreted changed more than the name: %+v", got)
			}
		})
	}
}
