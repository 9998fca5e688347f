package dumpindex

import (
	"sync"

	"github.com/jitprof/jitprof/jitdump"
)

// methodIndex finds a method's name by the runtime's address of it
// (JITPROF_METHODS records: HotSpot's Method*, which interpreted frames
// hold). It is built on the first lookup, and goes on from there with the
// records a later Extend read: most reports never ask.
type methodIndex struct {
	mu      sync.Mutex
	recs    []*jitdump.MethodNames // in file order
	indexed int                    // recs[:indexed] are in byAddr
	byAddr  map[uint64][]methodName
}

// methodName is one record's naming of an address.
type methodName struct {
	time uint64
	rec  *jitdump.MethodNames
	i    int
	full string // Class + Names[i], made on first use
}

func (x *methodIndex) add(r *jitdump.MethodNames) {
	x.mu.Lock()
	x.recs = append(x.recs, r)
	x.mu.Unlock()
}

// Method returns the full name (class signature, name and signature:
// LWork;fib(I)J, as CODE_LOAD names compiled methods) of the method at
// address addr at time t: the name of the latest JITPROF_METHODS record
// naming addr at or before t, as a class unloaded frees its methods'
// memory for another's. clock converts a record's time to t's clock (nil:
// the same). ok is false when no record names it by then.
func (d *Dump) Method(addr, t uint64, clock func(uint64) uint64) (name string, ok bool) {
	x := &d.methods
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.indexed < len(x.recs) {
		if x.byAddr == nil {
			x.byAddr = make(map[uint64][]methodName)
		}
		for _, r := range x.recs[x.indexed:] {
			for i, m := range r.Methods {
				x.byAddr[m] = append(x.byAddr[m], methodName{time: r.Timestamp, rec: r, i: i})
			}
		}
		x.indexed = len(x.recs)
	}
	names := x.byAddr[addr]
	// Records come in file order, which is their time's as a runtime
	// writes them; the latest at or before t is looked for from the end.
	for k := len(names) - 1; k >= 0; k-- {
		n := &names[k]
		at := n.time
		if clock != nil {
			at = clock(at)
		}
		if at > t {
			continue
		}
		if n.full == "" {
			n.full = n.rec.Class + n.rec.Names[n.i]
		}
		return n.full, true
	}
	return "", false
}
