package unwind

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jitprof/jitprof/internal/cfi"
	"github.com/jitprof/jitprof/internal/elfsym"
	"github.com/jitprof/jitprof/internal/foreign"
	"github.com/jitprof/jitprof/jitdump"
	"github.com/jitprof/jitprof/jitelf"
)

// x86-64 DWARF registers, as the tests' CFA programs name them.
const (
	rbp = 6
	rsp = 7
	rip = 16
	r10 = 10
)

// x86 is the CIE of every x86-64 function: at entry the CFA is rsp+8 and
// the return address is just below it.
func x86(instr jitdump.CFAProgram) *jitdump.FrameInfo {
	return &jitdump.FrameInfo{CodeAlign: 1, DataAlign: -8, ReturnAddress: rip,
		Initial: jitdump.CFAProgram{}.DefCFA(rsp, 8).Offset(rip, 1), Instructions: instr}
}

// raw appends instructions jitdump.CFAProgram has no method for.
func raw(p jitdump.CFAProgram, b ...byte) jitdump.CFAProgram { return append(p, b...) }

var (
	entry  = Rule{Kind: KindSP, CFAOff: 8, RAOff: -8}
	pushed = Rule{Kind: KindSP, CFAOff: 16, RAOff: -8, FPOff: -16}
	framed = Rule{Kind: KindFP, CFAOff: 16, RAOff: -8, FPOff: -16}
)

// The rows of hand-written CFA programs, as DWARF 5 section 6.4 defines
// them, looked up at the pcs where they change, one before and one after.
func TestFromUnwindingInfo(t *testing.T) {
	const code = 0x7f12_3456_1000
	// GNU ld's lazy PLT CFA: rsp+8, +8 from the entry's 11th byte on.
	pltExpr := []byte{0x77, 8, 0x80, 0, 0x3f, 0x1a, 0x3b, 0x2a, 0x33, 0x24, 0x22}
	cases := []struct {
		name  string
		size  uint64
		instr jitdump.CFAProgram
		want  map[uint64]Rule // by offset in the code; absent rules: none
	}{
		{"push rbp; mov rbp,rsp; ...; pop rbp; ret", 40,
			jitdump.CFAProgram{}.AdvanceLoc(1).DefCFAOffset(16).Offset(rbp, 2).AdvanceLoc(3).DefCFARegister(rbp).
				AdvanceLoc(30).DefCFA(rsp, 8).Restore(rbp),
			map[uint64]Rule{0: entry, 1: pushed, 3: pushed, 4: framed, 33: framed, 34: entry, 39: entry}},
		{"remember and restore state around a mid-function return", 32,
			raw(jitdump.CFAProgram{}.AdvanceLoc(1).DefCFAOffset(16).Offset(rbp, 2).AdvanceLoc(4), cfi.OpRememberState).
				DefCFAOffset(8).Restore(rbp).AdvanceLoc(1).
				Restore(rbp). // overridden by the restore_state below
				AdvanceLoc(0).AdvanceLoc(1).
				AdvanceLoc(2).AdvanceLoc(0),
			nil},
		{"outermost: return address undefined", 16,
			raw(jitdump.CFAProgram{}.AdvanceLoc(4), cfi.OpUndefined, rip),
			map[uint64]Rule{0: entry, 3: entry, 4: {Kind: KindEnd}, 15: {Kind: KindEnd}}},
		{"rbp kept in another register: no rule", 16,
			raw(jitdump.CFAProgram{}.AdvanceLoc(4), cfi.OpRegister, rbp, 3).AdvanceLoc(4).Restore(rbp),
			map[uint64]Rule{0: entry, 4: {}, 7: {}, 8: entry}},
		{"CFA from r10 (stack realignment): no rule", 16,
			jitdump.CFAProgram{}.AdvanceLoc(2).DefCFA(r10, 0).AdvanceLoc(6).DefCFA(rsp, 8),
			map[uint64]Rule{1: entry, 2: {}, 7: {}, 8: entry}},
		{"PLT expression", 48,
			raw(jitdump.CFAProgram{}.DefCFAOffset(16).AdvanceLoc(6).DefCFAOffset(24).AdvanceLoc(10), append([]byte{cfi.OpDefCFAExpr, byte(len(pltExpr))}, pltExpr...)...),
			map[uint64]Rule{0: {Kind: KindSP, CFAOff: 16, RAOff: -8}, 6: {Kind: KindSP, CFAOff: 24, RAOff: -8},
				16: {Kind: KindPLT, CFAOff: 8, RAOff: -8, PLTMin: 11}, 47: {Kind: KindPLT, CFAOff: 8, RAOff: -8, PLTMin: 11}}},
		{"other CFA expression: no rule", 16,
			raw(jitdump.CFAProgram{}.AdvanceLoc(2), cfi.OpDefCFAExpr, 2, 0x77, 8),
			map[uint64]Rule{1: entry, 2: {}, 15: {}}},
		{"advance_loc2 and signed offsets", 1000,
			raw(jitdump.CFAProgram{}.AdvanceLoc(300), cfi.OpDefCFASF, rsp, 0x7e /* -2 * -8 */).AdvanceLoc(500).
				DefCFAOffset(4000),
			map[uint64]Rule{299: entry, 300: {Kind: KindSP, CFAOff: 16, RAOff: -8}, 799: {Kind: KindSP, CFAOff: 16, RAOff: -8},
				800: {Kind: KindSP, CFAOff: 4000, RAOff: -8}, 999: {Kind: KindSP, CFAOff: 4000, RAOff: -8}}},
	}
	// The remember/restore case's rows, spelled out: 0 entry, 1 pushed,
	// 5 the epilogue's entry rule, 6 back to pushed by restore_state.
	cases[1].want = map[uint64]Rule{0: entry, 1: pushed, 4: pushed, 5: entry, 6: pushed, 31: pushed}
	cases[1].instr = raw(jitdump.CFAProgram{}.AdvanceLoc(1).DefCFAOffset(16).Offset(rbp, 2).AdvanceLoc(4), cfi.OpRememberState)
	cases[1].instr = raw(cases[1].instr.DefCFAOffset(8).Restore(rbp).AdvanceLoc(1), cfi.OpRestoreState)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			u, err := x86(c.instr).UnwindingInfo(c.size)
			if err != nil {
				t.Fatal(err)
			}
			tab, err := FromUnwindingInfo(u, code, c.size)
			if err != nil {
				t.Fatal(err)
			}
			if err := tab.Err(); err != nil {
				t.Errorf("Err: %v", err)
			}
			for off, want := range c.want {
				got, ok := tab.Lookup(code + off)
				if got != want || ok != (want.Kind != KindNone) {
					t.Errorf("Lookup(code+%d) = %v, %v; want %v", off, got, ok, want)
				}
			}
			for _, pc := range []uint64{code - 1, code + c.size, code + c.size + 100, 0} {
				if r, ok := tab.Lookup(pc); ok {
					t.Errorf("Lookup(%#x) outside the code = %v", pc, r)
				}
			}
		})
	}
}

// ehFrame assembles an .eh_frame at addr: one CIE (zR, pc-relative sdata4
// pointers, the x86-64 entry rules) and one FDE per fdes entry. An FDE
// whose cie is set points there instead of at the CIE.
type testFDE struct {
	start, size uint64
	instr       []byte
	cie         int // 0: the CIE; else this offset
}

func ehFrame(addr uint64, fdes []testFDE) (data []byte, offs []int) {
	le := func(b []byte, v uint32) []byte { return append(b, byte(v), byte(v>>8), byte(v>>16), byte(v>>24)) }
	entry := func(b []byte, id func(at int) uint32, body func(b []byte) []byte) []byte {
		start := len(b)
		b = append(b, 0, 0, 0, 0)
		b = le(b, id(len(b)))
		b = body(b)
		for (len(b)-start)%8 != 0 {
			b = append(b, cfi.OpNop)
		}
		n := uint32(len(b) - start - 4)
		b[start], b[start+1], b[start+2], b[start+3] = byte(n), byte(n>>8), byte(n>>16), byte(n>>24)
		return b
	}
	data = entry(nil, func(int) uint32 { return 0 }, func(b []byte) []byte {
		b = append(b, 1, 'z', 'R', 0, 1, 0x78, rip, 1, cfi.PEPCRel|cfi.PESdata4)
		return append(b, jitdump.CFAProgram{}.DefCFA(rsp, 8).Offset(rip, 1)...)
	})
	for _, f := range fdes {
		offs = append(offs, len(data))
		data = entry(data, func(at int) uint32 {
			if f.cie != 0 {
				return uint32(at - f.cie)
			}
			return uint32(at)
		}, func(b []byte) []byte {
			b = le(b, uint32(f.start-(addr+uint64(len(b)))))
			b = le(b, uint32(f.size))
			return append(append(b, 0), f.instr...)
		})
	}
	return le(data, 0), offs
}

// A bad FDE is reported with its file and offset, and the good ones
// around it are kept.
func TestBadFDEsKept(t *testing.T) {
	const code, size = 0x40_0000, 0x100
	push := []byte(jitdump.CFAProgram{}.AdvanceLoc(1).DefCFAOffset(16))
	cases := []struct {
		name string
		bad  testFDE
		msg  string
	}{
		{"unknown instruction", testFDE{start: code + 0x10, size: 0x10, instr: []byte{0x20}}, "unknown instruction 0x20"},
		{"restore_state with nothing remembered", testFDE{start: code + 0x10, size: 0x10, instr: []byte{cfi.OpRestoreState}}, "without a remembered state"},
		{"truncated operand", testFDE{start: code + 0x10, size: 0x10, instr: []byte{cfi.OpDefCFA, rsp, 0x80, 0x80, 0x80, 0x80, 0x80}}, "truncated"},
		{"CIE pointer to nowhere", testFDE{start: code + 0x10, size: 0x10, cie: 4}, "CIE at"},
		{"outside the code", testFDE{start: code + size, size: 0x10, instr: push}, "outside the code"},
		{"location going back", testFDE{start: code + 0x10, size: 0x10, instr: []byte{cfi.OpSetLoc, 0, 0, 0, 0}}, "goes back"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			eh, offs := ehFrame(code+size, []testFDE{
				{start: code, size: 0x10, instr: push},
				c.bad,
				{start: code + 0x20, size: 0x10, instr: push},
			})
			tab, err := FromUnwindingInfo(&jitdump.UnwindingInfo{EHFrame: eh}, code, size)
			if err != nil {
				t.Fatal(err)
			}
			want := Rule{Kind: KindSP, CFAOff: 16, RAOff: -8}
			for _, pc := range []uint64{code + 1, code + 0x21} {
				if r, ok := tab.Lookup(pc); !ok || r != want {
					t.Errorf("good FDE around the bad one: Lookup(%#x) = %v, %v; want %v", pc, r, ok, want)
				}
			}
			if r, ok := tab.Lookup(code + 0x11); ok {
				t.Errorf("bad FDE's code has rule %v", r)
			}
			err = tab.Err()
			if err == nil {
				t.Fatal("Err() = nil")
			}
			at := fmt.Sprintf(".eh_frame+%#x:", offs[1])
			if s := err.Error(); !strings.Contains(s, "UNWINDING_INFO of the code at 0x400000") || !strings.Contains(s, at) || !strings.Contains(s, c.msg) {
				t.Errorf("Err() = %q; want the source, %q and %q", s, at, c.msg)
			}
		})
	}
}

// A length that runs past the section stops the reading there; what came
// before is kept, and nothing panics on any truncation of a good section.
func TestTruncated(t *testing.T) {
	const code, size = 0x40_0000, 0x100
	push := []byte(jitdump.CFAProgram{}.AdvanceLoc(1).DefCFAOffset(16))
	eh, offs := ehFrame(code+size, []testFDE{{start: code, size: 0x10, instr: push}, {start: code + 0x20, size: 0x10, instr: push}})
	for n := range len(eh) {
		tab, err := FromUnwindingInfo(&jitdump.UnwindingInfo{EHFrame: eh[:n]}, code, size)
		_, ok := func() (Rule, bool) {
			if tab == nil {
				return Rule{}, false
			}
			return tab.Lookup(code + 1)
		}()
		if wantFirst := n >= offs[1]; ok != wantFirst {
			t.Errorf("%d bytes: first FDE's rule found %v, want %v (err %v)", n, ok, wantFirst, err)
		}
		if tab == nil && err == nil {
			t.Errorf("%d bytes: no table and no error", n)
		}
	}
}

// An ELF image as perf inject makes them (jitelf), holding several
// functions' .eh_frame moved to where each function is in the image.
func TestOpenELFImage(t *testing.T) {
	progs := []jitdump.CFAProgram{
		jitdump.CFAProgram{}.AdvanceLoc(1).DefCFAOffset(16).Offset(rbp, 2).AdvanceLoc(3).DefCFARegister(rbp),
		jitdump.CFAProgram{}.AdvanceLoc(4).DefCFAOffset(48),
		nil,
	}
	var fns []jitelf.Function
	for i, p := range progs {
		u, err := x86(p).UnwindingInfo(64)
		if err != nil {
			t.Fatal(err)
		}
		fns = append(fns, jitelf.Function{Name: "f" + string(rune('0'+i)), Code: bytes.Repeat([]byte{0x90}, 64),
			CodeAddr: 0x7f00_0000_0000 + uint64(i)*0x1000, Unwind: u})
	}
	var buf bytes.Buffer
	lay, err := jitelf.Write(&buf, jitelf.Options{}, fns)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "jitted-1-1.so")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	tab, err := OpenELF(path, elfsym.Recorded{BuildID: lay.BuildID[:]}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := tab.Err(); err != nil {
		t.Errorf("Err: %v", err)
	}
	want := []map[uint64]Rule{
		{0: entry, 1: pushed, 4: framed, 63: framed},
		{0: entry, 3: entry, 4: {Kind: KindSP, CFAOff: 48, RAOff: -8}, 63: {Kind: KindSP, CFAOff: 48, RAOff: -8}},
		{0: entry, 63: entry},
	}
	for i, w := range want {
		start := lay.Offsets[i]
		for off, r := range w {
			// The image's addresses are its file offsets: AddrOf is the identity.
			addr, ok := tab.AddrOf(start + off)
			if !ok || addr != start+off {
				t.Errorf("AddrOf(%#x) = %#x, %v", start+off, addr, ok)
			}
			if got, ok := tab.Lookup(addr); !ok || got != r {
				t.Errorf("f%d+%d: Lookup = %v, %v; want %v", i, off, got, ok, r)
			}
		}
	}
	if end := lay.Offsets[2] + 64; tab.Len() > 0 {
		if got, ok := tab.Lookup(end); ok {
			t.Errorf("after the last function: Lookup(%#x) = %v", end, got)
		}
	}
	if _, err := OpenELF(path, elfsym.Recorded{BuildID: []byte{1, 2, 3}}, nil); err == nil || !strings.Contains(err.Error(), "build-id") {
		t.Errorf("another build-id: err = %v", err)
	}
	// at maps the recorded path to where the file is.
	if _, err := OpenELF("/recorded/jitted-1-1.so", elfsym.Recorded{}, func(p string) foreign.Path {
		return foreign.Plain(filepath.Join(filepath.Dir(path), filepath.Base(p)))
	}); err != nil {
		t.Errorf("through at: %v", err)
	}
}

// arm64 CFI (return address in x30) is refused with a clear error, not
// compiled into rules that say nothing: in an UNWINDING_INFO, which does
// not say its machine, by its return address column; in an ELF file by
// its machine.
func TestARM64Refused(t *testing.T) {
	fi := &jitdump.FrameInfo{CodeAlign: 4, DataAlign: -8, ReturnAddress: byte(cfi.ARM64.RA), Initial: jitdump.CFAProgram{}.DefCFA(cfi.ARM64.SP, 0)}
	u, err := fi.UnwindingInfo(64)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := FromUnwindingInfo(u, 0x1000, 64); err == nil || !strings.Contains(err.Error(), "only x86-64") {
		t.Errorf("UNWINDING_INFO: err = %v", err)
	}
	for _, tc := range []struct {
		machine elf.Machine
		want    string
	}{
		{elf.EM_AARCH64, "arm64 stacks are not unwound yet"},
		{elf.EM_RISCV, "not known"},
	} {
		var img bytes.Buffer
		fns := []jitelf.Function{{Name: "f", Code: make([]byte, 64), CodeAddr: 0x1000, Unwind: u}}
		if _, err := jitelf.Write(&img, jitelf.Options{Machine: tc.machine, Class: elf.ELFCLASS64, ByteOrder: binary.LittleEndian}, fns); err != nil {
			t.Fatal(err)
		}
		if _, err := FromELFImage(img.Bytes(), "image"); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v ELF image: err = %v; want %q", tc.machine, err, tc.want)
		}
	}
}
