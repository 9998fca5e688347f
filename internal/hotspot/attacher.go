package hotspot

import (
	"context"
	"errors"
	"sync"
)

// Attacher loads the agent into the JVMs a watcher comes across, each
// once: a JVM attached, or one that refused, is not asked again while it
// lives (a process is known by its pid and start). A JVM that already
// writes a jitdump is left as it is.
type Attacher struct {
	Options Options
	// Log, if set, is told of each JVM that refused, once: one line.
	Log func(error)

	mu    sync.Mutex
	tried map[process]bool // true once the outcome is final
	kept  int              // how many were left at the last prune
	stats Stats
}

// Stats count the JVMs an Attacher came across, by outcome.
type Stats struct {
	Attached int // the agent was loaded
	Already  int // they already wrote a jitdump
	Refused  int // not HotSpot, attach disabled, the load failed...
}

type process struct {
	pid   uint32
	start uint64
}

// Attach loads the agent into JVM pid unless it was tried before. It
// returns nil if the JVM writes a jitdump now, or whatever kept it from it.
// A JVM not catching SIGQUIT yet (ErrNotReady: it is starting) is tried
// again next time, and told of once.
func (a *Attacher) Attach(ctx context.Context, pid uint32) error {
	start, err := a.Options.proc().Started(pid)
	if err != nil {
		return err // gone
	}
	key := process{pid, start}
	a.mu.Lock()
	final, told := a.tried[key]
	a.mu.Unlock()
	if final {
		return nil
	}
	err = Load(ctx, pid, a.Options)
	if ctx.Err() != nil {
		return err // cut short: nothing is known of the JVM
	}
	notReady := errors.Is(err, ErrNotReady)
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.tried == nil {
		a.tried = map[process]bool{}
	}
	a.tried[key] = !notReady
	switch {
	case err == nil:
		a.stats.Attached++
	case errors.Is(err, ErrAttached):
		a.stats.Already++
		return nil
	case !notReady:
		a.stats.Refused++
	}
	if err != nil && a.Log != nil && (!told || !notReady) {
		a.Log(err)
	}
	a.prune()
	return err
}

// prune forgets the processes that have exited (their pid gone, or
// another process's now), each time what is remembered has doubled: a
// long watch over short-lived JVMs must not grow without bound.
func (a *Attacher) prune() {
	if len(a.tried) < max(64, 2*a.kept) {
		return
	}
	for p := range a.tried {
		if start, err := a.Options.proc().Started(p.pid); err != nil || start != p.start {
			delete(a.tried, p)
		}
	}
	a.kept = len(a.tried)
}

// Stats returns the counts so far.
func (a *Attacher) Stats() Stats {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.stats
}
