package symbolize

import (
	"encoding/binary"
	"math"
	"slices"
	"strings"
	"sync"

	"github.com/jitprof/jitprof/internal/contract"
	"github.com/jitprof/jitprof/internal/dumpindex"
	"github.com/jitprof/jitprof/internal/unwind"
	"golang.org/x/arch/x86/x86asm"
)

// HotSpot's compiled methods carry no CFI: neither jitprof's JVMTI agent
// nor perf's writes UNWINDING_INFO for them, and JVMTI does not say a
// method's frame size. Without -XX:+PreserveFramePointer their code uses
// rbp as it likes, so the frame-pointer walk stops at the first compiled
// frame. But every compiled method (C1's and C2's, OSR entries and native
// wrappers) sets up one fixed frame the same way, in
// MacroAssembler::verified_entry and C1's build_frame, and tears it down
// the same way before each return; the rules are read here from the code
// bytes the dump holds, as a disassembler would read them. Deriving them
// from the dump rather than having the agent write CFI keeps the agent
// small, and works for the dumps of any agent that copies the code (perf's
// libperf-jvmti too), recorded before or after this was written.
//
// The entry of an x86-64 compiled method, at its verified entry point (or
// OSR entry), is one of:
//
//	mov %eax,-BANG(%rsp)   stack bang: C1, and C2 where the frame needs it
//	push %rbp
//	[mov %rsp,%rbp]        -XX:+PreserveFramePointer, native wrappers
//	[sub $F-16,%rsp]       absent when the frame is just rbp and the return address
//
//	sub $F-8,%rsp          C2 without a bang: the immediate always 4 bytes
//	mov %rbp,F-16(%rsp)
//
// Either way the frame is F bytes from the return address down: the
// caller's rsp (the CFA) is rsp+F in the body, the return address at
// CFA-8, the caller's rbp at CFA-16. Each return is preceded by
// add $F-16,%rsp (not with a frame of 16 bytes) and pop %rbp, or by leave
// in frames kept by rbp. Before the entry (the unverified entry's inline
// cache check, an OSR method's trap at its unused verified entry) the
// return address is at rsp.
//
// A method made not entrant has its entry's first 5 bytes overwritten by a
// jmp (NativeJump::patch_verified_entry), as the code of methods an agent
// loaded late is replayed: the rest of the first instruction is left, and
// its length (the bang's 7 bytes, sub's 7) tells where it ended.

// hotspotEntrySpan bounds where the verified entry may lie: after the
// unverified entry's inline cache check (at most ~40 bytes with compressed
// class pointers and a heap base) and its alignment padding.
const hotspotEntrySpan = 128

// hotspotFrame is the rules of one compiled method, by offset in its code.
type hotspotFrame struct {
	rows []hotspotRow // by increasing offset, the first at 0
}

type hotspotRow struct {
	off  uint32 // the rule holds from here to the next row
	rule unwind.Rule
}

// The states of a HotSpot frame, as rules.
var (
	// hotspotEntry: only the return address is pushed.
	hotspotEntry = unwind.Rule{Kind: unwind.KindSP, CFAOff: 8, RAOff: -8}
	// hotspotSaved: rbp pushed below it (or popped back into rsp's
	// reach by add, before pop %rbp).
	hotspotSaved = unwind.Rule{Kind: unwind.KindSP, CFAOff: 16, RAOff: -8, FPOff: -16}
	// hotspotFP: a frame kept by rbp.
	hotspotFP = unwind.Rule{Kind: unwind.KindFP, CFAOff: 16, RAOff: -8, FPOff: -16}
)

// hotspotBody is the rule of a frame of size bytes, rbp saved.
func hotspotBody(size int32) unwind.Rule {
	return unwind.Rule{Kind: unwind.KindSP, CFAOff: size, RAOff: -8, FPOff: -16}
}

// isJavaMethod tells a name of the form HotSpot agents give compiled
// methods: a class signature, the method's name and its signature
// (LWork;fib(I)J, [I;clone()Ljava/lang/Object;), as jitprof's agent and
// perf's libperf-jvmti write them. Stubs and the interpreter are named
// otherwise.
func isJavaMethod(name string) bool {
	if len(name) < 5 || (name[0] != 'L' && name[0] != '[') {
		return false
	}
	semi := strings.IndexByte(name, ';')
	open := strings.IndexByte(name, '(')
	return semi > 0 && open > semi+1 && strings.IndexByte(name[open:], ')') > 0
}

// hotspotPrologue is where a compiled method's frame is set up.
type hotspotPrologue struct {
	entry  int   // the verified (or OSR) entry
	saved  int   // rbp is saved from here on
	body   int   // the frame is whole from here on
	size   int32 // F: the frame's bytes, the return address's included
	bySP   bool  // saved and body differ: between them, the frame is size bytes but rbp not yet saved (C2 without a bang)
	pushed int   // bang form: the end of push %rbp, where the CFA is rsp+16
	fp     bool  // the body keeps the frame by rbp
}

// findHotspotPrologue finds the set-up of a compiled method's frame in
// the first bytes of its code.
func findHotspotPrologue(code []byte) (hotspotPrologue, bool) {
	n := min(len(code), hotspotEntrySpan)
	for i := 0; i < n; i++ {
		if p, ok := bangPrologue(code, i); ok {
			return p, true
		}
		if p, ok := noBangPrologue(code, i); ok {
			return p, true
		}
	}
	return hotspotPrologue{}, false
}

// firstInstruction tells whether a 7-byte instruction ended at i: either
// it is there whole (head its first bytes), or a jmp rel32 overwrote its
// first 5.
func firstInstruction(code []byte, i int, head ...byte) bool {
	if i < 7 {
		return false
	}
	at := code[i-7:]
	return at[0] == 0xe9 || (len(head) > 0 && string(at[:len(head)]) == string(head))
}

// bangPrologue matches, at i, push %rbp after a stack bang (mov
// %eax,disp32(%rsp): 89 84 24 disp32), then [mov %rsp,%rbp] and [sub
// $imm,%rsp].
func bangPrologue(code []byte, i int) (hotspotPrologue, bool) {
	if code[i] != 0x55 || !firstInstruction(code, i, 0x89, 0x84, 0x24) {
		return hotspotPrologue{}, false
	}
	if code[i-7] != 0xe9 && int32(binary.LittleEndian.Uint32(code[i-4:])) >= 0 {
		return hotspotPrologue{}, false // a bang reaches below rsp
	}
	p := hotspotPrologue{entry: i - 7, saved: i + 1, pushed: i + 1, size: 16}
	j := i + 1
	rest := code[j:]
	if hasPrefix(rest, 0x48, 0x89, 0xe5) || hasPrefix(rest, 0x48, 0x8b, 0xec) {
		p.fp = true
		j += 3
		rest = code[j:]
	}
	switch {
	case hasPrefix(rest, 0x48, 0x83, 0xec) && len(rest) >= 4:
		p.size += int32(int8(rest[3]))
		j += 4
	case hasPrefix(rest, 0x48, 0x81, 0xec) && len(rest) >= 7:
		p.size += int32(binary.LittleEndian.Uint32(rest[3:]))
		j += 7
	}
	if p.size < 16 || p.size%8 != 0 {
		return hotspotPrologue{}, false
	}
	p.body = j
	return p, true
}

// noBangPrologue matches, at i, mov %rbp,disp(%rsp) after sub
// $disp+8,%rsp (48 81 ec imm32), the frame C2 builds without a bang.
func noBangPrologue(code []byte, i int) (hotspotPrologue, bool) {
	rest := code[i:]
	var disp int32
	var l int
	switch {
	case hasPrefix(rest, 0x48, 0x89, 0x2c, 0x24):
		disp, l = 0, 4
	case hasPrefix(rest, 0x48, 0x89, 0x6c, 0x24) && len(rest) >= 5:
		disp, l = int32(int8(rest[4])), 5
	case hasPrefix(rest, 0x48, 0x89, 0xac, 0x24) && len(rest) >= 8:
		disp, l = int32(binary.LittleEndian.Uint32(rest[4:])), 8
	default:
		return hotspotPrologue{}, false
	}
	// The frame, disp+16 bytes, is one an int32 holds: past that, disp+8
	// and sub's immediate wrap alike and the frame's size is negative.
	if !firstInstruction(code, i, 0x48, 0x81, 0xec) || disp < 0 || disp%8 != 0 || disp > math.MaxInt32-16 {
		return hotspotPrologue{}, false
	}
	if code[i-7] != 0xe9 && int32(binary.LittleEndian.Uint32(code[i-4:])) != disp+8 {
		return hotspotPrologue{}, false
	}
	return hotspotPrologue{entry: i - 7, saved: i + l, body: i + l, size: disp + 16, bySP: true, pushed: i}, true
}

func hasPrefix(b []byte, p ...byte) bool { return len(b) >= len(p) && string(b[:len(p)]) == string(p) }

// isFrameless tells the code that jumps to the method it dispatches to
// without a frame of its own: the method handle intrinsics (linkToStatic,
// invokeBasic, ...: gen_special_dispatch), and the vtable and itable
// stubs.
func isFrameless(name string) bool {
	if name == "vtable stub" || name == "itable stub" {
		return true
	}
	m, ok := strings.CutPrefix(name, "Ljava/lang/invoke/MethodHandle;")
	return ok && (strings.HasPrefix(m, "linkTo") || strings.HasPrefix(m, "invokeBasic("))
}

// isRuntimeStub tells the stubs through which C2's code calls the VM
// (_new_instance_Java, _complete_monitor_locking_Java...): C2 builds their
// frame as a method's, without a bang.
func isRuntimeStub(name string) bool {
	return len(name) > len("__Java") && name[0] == '_' && strings.HasSuffix(name, "_Java")
}

// newHotspotFrame derives the rules of compiled method name from its code,
// or returns nil when its entry is not one HotSpot writes.
func newHotspotFrame(name string, code []byte) *hotspotFrame {
	if len(code) >= 1<<32 {
		return nil
	}
	p, ok := findHotspotPrologue(code)
	if !ok {
		if isFrameless(name) {
			return &hotspotFrame{rows: []hotspotRow{{0, hotspotEntry}}}
		}
		return nil
	}
	body := hotspotBody(p.size)
	if p.fp {
		body = hotspotFP
	}
	f := &hotspotFrame{}
	f.add(0, hotspotEntry)
	if p.bySP {
		// sub $F-8,%rsp: the frame is whole, rbp not saved yet.
		f.add(p.pushed, unwind.Rule{Kind: unwind.KindSP, CFAOff: p.size, RAOff: -8})
	} else {
		f.add(p.pushed, hotspotSaved)
	}
	f.add(p.body, body)
	f.epilogues(code, p.body, p.size, body)
	return f
}

// add appends a row unless the rule goes on as it was.
func (f *hotspotFrame) add(off int, r unwind.Rule) {
	if n := len(f.rows); n > 0 {
		if f.rows[n-1].rule == r {
			return
		}
		if int(f.rows[n-1].off) == off {
			f.rows[n-1].rule = r
			return
		}
	}
	f.rows = append(f.rows, hotspotRow{uint32(off), r})
}

// epilogues decodes the code after the prologue, one instruction after
// the other, for the returns: add $F-16,%rsp, pop %rbp (or leave), then
// the return poll and ret, or a jmp (C2's rethrow). The body's rule
// holds again after each. Code that does not decode ends the scan: the
// rest keeps the body's rule.
func (f *hotspotFrame) epilogues(code []byte, from int, size int32, body unwind.Rule) {
	const (
		inBody = iota
		added  // add $F-16,%rsp: rbp at the top of the stack
		popped // pop %rbp: the return address at the top
	)
	state := inBody
	for pc := from; pc < len(code); {
		in, err := x86asm.Decode(code[pc:], 64)
		if err != nil || in.Len == 0 {
			return
		}
		next := pc + in.Len
		switch {
		case in.Op == x86asm.ADD && in.Args[0] == x86asm.RSP && state == inBody && size > 16 && !f.fpBody(body):
			if imm, ok := in.Args[1].(x86asm.Imm); ok && int64(imm) == int64(size-16) {
				state = added
				f.add(next, hotspotSaved)
			}
		case in.Op == x86asm.POP && in.Args[0] == x86asm.RBP && state != popped:
			state = popped
			f.add(next, hotspotEntry)
		case in.Op == x86asm.LEAVE && state == inBody:
			state = popped
			f.add(next, hotspotEntry)
		case (in.Op == x86asm.RET || in.Op == x86asm.JMP) && state != inBody:
			state = inBody
			f.add(next, body)
		}
		pc = next
	}
}

func (f *hotspotFrame) fpBody(body unwind.Rule) bool { return body.Kind == unwind.KindFP }

// lookup returns the rule at offset off of the code.
func (f *hotspotFrame) lookup(off uint64) (unwind.Rule, bool) {
	i, found := slices.BinarySearchFunc(f.rows, off, func(r hotspotRow, off uint64) int {
		switch {
		case uint64(r.off) < off:
			return -1
		case uint64(r.off) > off:
			return 1
		}
		return 0
	})
	if !found {
		i--
	}
	if i < 0 {
		return unwind.Rule{}, false
	}
	return f.rows[i].rule, true
}

// hotspotFrames are the rules derived so far, per compiled method: nil
// for a function whose code is not a compiled method's.
type hotspotFrames struct {
	mu     sync.Mutex
	frames map[*dumpindex.Code]*hotspotFrame
}

// hotspotInterpreter is the name HotSpot gives its template interpreter's
// code in DynamicCodeGenerated, which agents write as it is.
const hotspotInterpreter = "Interpreter"

// interpreterRule steps from an interpreted frame: a frame record at rbp
// with the caller's stack pointer saved at rbp-8
// (frame::interpreter_frame_sender_sp_offset, -1 word, in
// src/hotspot/cpu/x86/frame_x86.hpp). Compiled code calling an interpreted
// method goes through the c2i adapter, which extends the caller's frame
// for the arguments, so rbp+16 is not the compiled caller's stack pointer
// and its rule, relative to it, would read the arguments for a return
// address.
var interpreterRule = unwind.Rule{Kind: unwind.KindSavedSP, CFAOff: -8}

// rule returns the rule at offset off of fn's code, when fn is a HotSpot
// compiled method whose frame set-up was recognized, or the interpreter.
func (h *hotspotFrames) rule(fn *dumpindex.Code, off uint64) (unwind.Rule, bool) {
	if fn.Name == hotspotInterpreter {
		return interpreterRule, true
	}
	if !isJavaMethod(fn.Name) && !isRuntimeStub(fn.Name) && !isFrameless(fn.Name) || off >= uint64(len(fn.Code())) {
		return unwind.Rule{}, false
	}
	h.mu.Lock()
	f, seen := h.frames[fn]
	if !seen {
		f = newHotspotFrame(fn.Name, fn.Code())
		if h.frames == nil {
			h.frames = make(map[*dumpindex.Code]*hotspotFrame)
		}
		h.frames[fn] = f
	}
	h.mu.Unlock()
	if f == nil {
		return unwind.Rule{}, false
	}
	return f.lookup(off)
}

// interpreterMethodSlot is where an interpreter frame holds its Method*,
// below its frame pointer: frame::interpreter_frame_method_offset, -3
// words (src/hotspot/cpu/x86/frame_x86.hpp).
const interpreterMethodSlot = 3 * 8

// Interpreted names the Java method that a frame of HotSpot's interpreter
// runs: fr is what Lookup found at the frame's pc, fp the frame's frame
// pointer, stack the sample's copy of the stack from sp, t the sample's
// time. The frame holds its Method* at fp-24; the dump's JITPROF_METHODS
// records name it at t. The frame returned is fr named as the method, as
// the agent names compiled ones, with contract.InterpretedSuffix. ok is
// false when fr is not the interpreter's, the slot lies outside the copy,
// or no record names what it holds.
func (s *Space) Interpreted(fr Frame, t, fp, sp uint64, stack []byte) (Frame, bool) {
	m := fr.Module
	if m == nil || m.Kind != JIT || m.Dump == nil || fr.Symbol.JIT == nil || fr.Symbol.Name != hotspotInterpreter {
		return fr, false
	}
	slot := fp - interpreterMethodSlot
	if fp < interpreterMethodSlot || slot < sp || slot-sp >= uint64(len(stack)) || uint64(len(stack))-(slot-sp) < 8 {
		return fr, false
	}
	method := binary.LittleEndian.Uint64(stack[slot-sp:])
	name, ok := m.Dump.Method(method, t, m.Dump.PerfTime)
	if !ok {
		return fr, false
	}
	fr.Symbol.Name = name + contract.InterpretedSuffix
	return fr, true
}
