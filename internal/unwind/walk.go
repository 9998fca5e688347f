package unwind

import "encoding/binary"

// Regs are the user registers a walk starts from: the program counter, the
// stack pointer and the frame pointer (rip, rsp, rbp on x86-64).
type Regs struct{ IP, SP, FP uint64 }

// Stop says why a walk ended.
type Stop uint8

const (
	// StopOutermost: the CFI says the frame has no caller (the return
	// address is undefined, as in _start), or the return address read is
	// 0. The stack is whole.
	StopOutermost Stop = iota
	// StopCutShort: a read went past the end of the stack copy; the
	// recording kept too little of the stack for the rest.
	StopCutShort
	// StopBadFrame: a read went below the stack pointer, or the next
	// frame's CFA did not lie above this one's: the rule or the frame
	// pointer was wrong here (used as a general register).
	StopBadFrame
	// StopDepth: MaxDepth frames were walked.
	StopDepth
)

func (s Stop) String() string {
	switch s {
	case StopOutermost:
		return "outermost frame"
	case StopCutShort:
		return "stack copy exhausted"
	case StopBadFrame:
		return "bad frame"
	case StopDepth:
		return "depth limit"
	}
	return "unknown stop"
}

// MaxDepth bounds the frames of one walk. An 8 KiB stack copy (perf's
// default) holds at most 512 frames of 16 bytes.
const MaxDepth = 1024

// Walk appends to pcs the leaf IP and each caller's return address (as
// read, not decremented), unwinding through stack, the copy of user memory
// starting at regs.SP. find gives the rule for a pc. Walk itself subtracts:
// it asks find for the leaf's rule at IP and for each caller's at its
// return address - 1, which lies in the call instruction and so in the
// caller's function even when the call was its last instruction. Where find
// has no rule, Walk steps by the frame pointer: the caller's at [fp], the
// return address at [fp+8] (the frame records of x86-64's and arm64's
// ABIs). It returns why it stopped.
func Walk(regs Regs, stack []byte, find func(pc uint64) (Rule, bool), pcs []uint64) ([]uint64, Stop) {
	return walk(regs, stack, find, pcs, nil)
}

// WalkFP is Walk that also appends to fps each frame's frame pointer, as
// the walk found it (fps[i] is pcs[i]'s), for a caller that reads what a
// runtime keeps in its frames (HotSpot's interpreter its Method*).
func WalkFP(regs Regs, stack []byte, find func(pc uint64) (Rule, bool), pcs, fps []uint64) ([]uint64, []uint64, Stop) {
	pcs, stop := walk(regs, stack, find, pcs, &fps)
	return pcs, fps, stop
}

// walk is Walk, appending the frames' frame pointers to *fps unless fps is nil.
func walk(regs Regs, stack []byte, find func(pc uint64) (Rule, bool), pcs []uint64, fps *[]uint64) ([]uint64, Stop) {
	base, n := regs.SP, uint64(len(stack))
	// read loads the 8 bytes at addr from the copy.
	read := func(addr uint64) (uint64, Stop, bool) {
		if addr < base {
			return 0, StopBadFrame, false
		}
		if n < 8 || addr-base > n-8 {
			return 0, StopCutShort, false
		}
		return binary.LittleEndian.Uint64(stack[addr-base:]), 0, true
	}
	pc, sp, fp := regs.IP, regs.SP, regs.FP
	pcs = append(pcs, pc)
	if fps != nil {
		*fps = append(*fps, fp)
	}
	lookup := pc
	for depth := 1; ; depth++ {
		if depth >= MaxDepth {
			return pcs, StopDepth
		}
		var cfa, ra, callerFP uint64
		var stop Stop
		var ok bool
		r, found := find(lookup)
		if found && r.Kind != KindSavedSP {
			switch r.Kind {
			case KindEnd:
				return pcs, StopOutermost
			case KindSP:
				cfa = sp + uint64(int64(r.CFAOff))
			case KindFP:
				cfa = fp + uint64(int64(r.CFAOff))
			case KindPLT:
				cfa = sp + uint64(int64(r.CFAOff))
				if pc&15 >= uint64(r.PLTMin) {
					cfa += 8
				}
			}
			if cfa <= sp {
				return pcs, StopBadFrame
			}
			if ra, stop, ok = read(cfa + uint64(int64(r.RAOff))); !ok {
				return pcs, stop
			}
			callerFP = fp
			// A slot below the stack pointer is one an epilogue has
			// already popped the frame pointer from (GCC leaves the
			// rule in place after pop %rbp): it holds the caller's
			// value again.
			if at := cfa + uint64(int64(r.FPOff)); r.FPOff != 0 && at >= sp {
				if callerFP, stop, ok = read(at); !ok {
					return pcs, stop
				}
			}
		} else {
			cfa = fp + 16
			if found { // KindSavedSP
				if cfa, stop, ok = read(fp + uint64(int64(r.CFAOff))); !ok {
					return pcs, stop
				}
			}
			if cfa <= sp {
				return pcs, StopBadFrame
			}
			if ra, stop, ok = read(fp + 8); !ok {
				return pcs, stop
			}
			if callerFP, stop, ok = read(fp); !ok {
				return pcs, stop
			}
		}
		if ra == 0 {
			return pcs, StopOutermost
		}
		pcs = append(pcs, ra)
		pc, sp, fp = ra, cfa, callerFP
		if fps != nil {
			*fps = append(*fps, fp)
		}
		lookup = ra - 1
	}
}
