package unwind

import "encoding/binary"

// Regs are the user registers a walk starts from.
type Regs struct{ IP, SP, BP uint64 }

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
	// pointer was wrong here (rbp used as a general register).
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
// has no rule, Walk steps by the frame pointer: the caller's rbp at [rbp],
// the return address at [rbp+8]. It returns why it stopped.
func Walk(regs Regs, stack []byte, find func(pc uint64) (Rule, bool), pcs []uint64) ([]uint64, Stop) {
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
	pc, sp, bp := regs.IP, regs.SP, regs.BP
	pcs = append(pcs, pc)
	lookup := pc
	for depth := 1; ; depth++ {
		if depth >= MaxDepth {
			return pcs, StopDepth
		}
		var cfa, ra, callerBP uint64
		var stop Stop
		var ok bool
		r, found := find(lookup)
		if found {
			switch r.Kind {
			case KindEnd:
				return pcs, StopOutermost
			case KindSP:
				cfa = sp + uint64(int64(r.CFAOff))
			case KindBP:
				cfa = bp + uint64(int64(r.CFAOff))
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
			callerBP = bp
			// A slot below the stack pointer is one an epilogue has
			// already popped rbp from (GCC leaves the rule in place
			// after pop %rbp): rbp holds the caller's value again.
			if at := cfa + uint64(int64(r.BPOff)); r.BPOff != 0 && at >= sp {
				if callerBP, stop, ok = read(at); !ok {
					return pcs, stop
				}
			}
		} else {
			cfa = bp + 16
			if cfa <= sp {
				return pcs, StopBadFrame
			}
			if ra, stop, ok = read(bp + 8); !ok {
				return pcs, stop
			}
			if callerBP, stop, ok = read(bp); !ok {
				return pcs, stop
			}
		}
		if ra == 0 {
			return pcs, StopOutermost
		}
		pcs = append(pcs, ra)
		pc, sp, bp = ra, cfa, callerBP
		lookup = ra - 1
	}
}
