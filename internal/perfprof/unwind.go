package perfprof

import (
	"fmt"

	"github.com/jitprof/jitprof/internal/cfi"
	"github.com/jitprof/jitprof/internal/symbolize"
	"github.com/jitprof/jitprof/internal/unwind"
	"github.com/jitprof/jitprof/perfdata"
	"golang.org/x/sys/unix"
)

// unwinder walks the user stacks that samples hold (perf record
// --call-graph dwarf, jitprof record --call-graph dwarf): the registers at
// the sample and a copy of the stack above the stack pointer.
type unwinder struct {
	arch  *cfi.Arch // the recording's: which of the sample's registers are which
	space *symbolize.Space
	// pid and t are the sample being walked, for find.
	pid   uint32
	t     uint64
	find  func(pc uint64) (unwind.Rule, bool) // u.rule, bound once
	rules []cachedRule                        // lookupSlots of them
	pcs   []uint64
	fps   []uint64 // each frame's frame pointer, for HotSpot's interpreter frames
	// stop is why the last walk ended, walked whether there was one.
	stop   unwind.Stop
	walked bool
}

type cachedRule struct {
	key         pcKey
	rule        unwind.Rule
	ok          bool
	from, until uint64
}

// newUnwinder returns the unwinder of a recording whose samples hold user
// stacks, of an architecture whose frames the walker knows.
func newUnwinder(r *perfdata.Reader, space *symbolize.Space) (*unwinder, error) {
	arch, ok, err := r.StringFeature(perfdata.FeatureArch)
	if err != nil {
		return nil, err
	}
	if !ok {
		// Without the section (a recording cut short before perf wrote
		// it), the machine is this one, as perf takes it.
		var u unix.Utsname
		if err := unix.Uname(&u); err != nil {
			return nil, err
		}
		arch = unix.ByteSliceToString(u.Machine[:])
	}
	a, err := cfi.ArchNamed(arch)
	if err != nil {
		return nil, fmt.Errorf("the samples hold user stacks to unwind, which jitprof does for x86_64 recordings only, not for %q", arch)
	}
	if err := unwind.Supported(a); err != nil {
		return nil, fmt.Errorf("the samples hold user stacks to unwind, and %v (the recording is of %s)", err, arch)
	}
	u := &unwinder{arch: a, space: space, rules: make([]cachedRule, lookupSlots)}
	u.find = u.rule
	return u, nil
}

// rule returns the rule at pc of the sample's process at its time, as
// unwind.Walk asks for it. Walks of one stack ask again and again for the
// same return addresses, so answers are cached as lookups are.
func (u *unwinder) rule(pc uint64) (unwind.Rule, bool) {
	pk := pcKey{pid: u.pid, pc: pc}
	c := &u.rules[pk.slot()]
	if c.key == pk && c.from <= u.t && u.t < c.until {
		return c.rule, c.ok
	}
	fr := u.space.Lookup(u.pid, pc, u.t, false)
	r, ok := u.space.UnwindRule(fr)
	*c = cachedRule{pk, r, ok, fr.From, fr.Until}
	return r, ok
}

// unwind adds the sample's frames: the kernel's, as its callchain has them
// (the kernel walks no user frames for such samples), then the user stack
// walked from the registers, or the sample's ip when it has no user
// registers.
func (a *aggregator) unwind(s *perfdata.Sample, t uint64) {
	u := a.unwinder
	u.walked = false
	if s.Attr.SampleType&perfdata.SampleCallchain != 0 {
		kernel := false
		for _, pc := range s.Callchain {
			if pc >= perfdata.ContextMax {
				if kernel = pc == perfdata.ContextKernel; !kernel {
					break
				}
				continue
			}
			if kernel {
				a.addCaller(s.Pid, pc, t, true)
			}
		}
	}
	ip, okIP := s.UserRegister(u.arch.PerfIP)
	sp, okSP := s.UserRegister(u.arch.PerfSP)
	fp, okFP := s.UserRegister(u.arch.PerfFP)
	if s.RegsABI == perfdata.RegsABINone || !okIP || !okSP || !okFP {
		if len(a.ids) == 0 {
			a.ids = append(a.ids, a.locate(s.Pid, s.IP, t, s.Misc&perfdata.MiscCPUModeMask == perfdata.MiscKernel, a.whole(0)))
		}
		return
	}
	u.pid, u.t = s.Pid, t
	u.pcs, u.fps, u.stop = unwind.WalkFP(unwind.Regs{IP: ip, SP: sp, FP: fp}, s.StackUser, u.find, u.pcs[:0], u.fps[:0])
	u.walked = true
	// The registers' ip is where the thread was interrupted, not a
	// return address, even below kernel frames: perf does not step it
	// back either.
	user := len(a.ids)
	a.ids = append(a.ids, a.locate(s.Pid, u.pcs[0], t, false, a.whole(user)))
	for _, pc := range u.pcs[1:] {
		a.addCaller(s.Pid, pc, t, false)
	}
	a.nameInterpreted(a.ids[user:], t, sp, s.StackUser)
}
