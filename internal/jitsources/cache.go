package jitsources

import (
	"os"
	"sync"

	"github.com/jitprof/jitprof/internal/dumpindex"
	"github.com/jitprof/jitprof/internal/foreign"
)

// DumpCache keeps dumps from one Load to the next, each extended with what
// its runtime appended since (dumpindex.Dump.Extend) rather than read again:
// for a caller that reads the same processes' dumps over and over, as the
// agent does every window. A dump read through it is what Read would give
// now.
type DumpCache struct {
	mu      sync.Mutex
	entries map[string]*cachedDump
	sweeps  uint64
}

type cachedDump struct {
	d    *dumpindex.Dump
	fi   os.FileInfo // of the file when last read: a file replaced is read anew
	used uint64      // the sweep it was last used in
}

// maxMappings bounds the mappings of one dump's file (each Extend maps it
// again, the records before aliasing the older ones): past it the dump is
// read anew, which for the agent's windows of 10 s is every ten minutes, so
// a dump followed for days neither fills the address space nor reaches the
// kernel's limit on mappings (vm.max_map_count).
const maxMappings = 64

// NewDumpCache returns an empty cache.
func NewDumpCache() *DumpCache { return &DumpCache{entries: make(map[string]*cachedDump)} }

// get returns the dump at src, read or extended. Paths differ between the
// calls of one Load, which may run at once.
func (c *DumpCache) get(src foreign.Path) (*dumpindex.Dump, error) {
	path := src.String()
	f, err := src.Open()
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	f.Close()
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	e := c.entries[path]
	c.mu.Unlock()
	if e != nil && os.SameFile(e.fi, fi) && fi.Size() >= e.fi.Size() && e.d.Mappings() < maxMappings {
		if _, err := e.d.Extend(); err != nil {
			return nil, err
		}
		c.mu.Lock()
		e.fi, e.used = fi, c.sweeps
		c.mu.Unlock()
		return e.d, nil
	}
	d, err := dumpindex.ReadFrom(src)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if e != nil {
		e.d.Close()
	}
	c.entries[path] = &cachedDump{d: d, fi: fi, used: c.sweeps}
	c.mu.Unlock()
	return d, nil
}

// Sweep closes the dumps no Load has used in the last keep sweeps, and
// drops the pages the others' users touched from resident memory, as a
// dump closed after each use would: a dump kept for days would otherwise
// keep every function's code a profile ever looked at. The Recordings
// that used them must be done with.
func (c *DumpCache) Sweep(keep uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sweeps++
	for path, e := range c.entries {
		if e.used+keep < c.sweeps {
			e.d.Close()
			delete(c.entries, path)
			continue
		}
		e.d.Evict()
	}
}

// Len returns how many dumps the cache holds.
func (c *DumpCache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}

// Close closes every dump the cache holds.
func (c *DumpCache) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for path, e := range c.entries {
		e.d.Close()
		delete(c.entries, path)
	}
}
