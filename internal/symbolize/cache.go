package symbolize

import (
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/jitprof/jitprof/internal/elfsym"
)

// TableCache keeps the symbol tables of ELF files, the kernel and the vDSO
// from one Space to the next, for a caller that builds many Spaces of one
// machine (jitprof agent builds one per window): reading node's or
// libjvm.so's symbols again for every window would cost more than all the
// sampling. An ELF file is read again when it changes (its inode, size or
// modification time), the kernel's symbols every KernelMaxAge (modules
// come and go).
type TableCache struct {
	mu      sync.Mutex
	gen     uint64
	entries map[tableKey]*tableEntry
}

// KernelMaxAge is how long the kernel's symbols are kept before they are
// read again.
const KernelMaxAge = 10 * time.Minute

type tableKey struct {
	kind    Kind
	name    string
	buildID string
	running bool // for the kernel and vDSO: the running kernel's
	ino     uint64
	size    int64
	mtime   int64
}

type tableEntry struct {
	table  *elfsym.Table // nil: there is none to use, which is kept too
	used   uint64        // the generation that last used it
	loaded time.Time
}

// NewTableCache returns an empty cache.
func NewTableCache() *TableCache {
	return &TableCache{entries: make(map[tableKey]*tableEntry)}
}

// get returns m's table for s, reading it on first use.
func (c *TableCache) get(s *Space, m *Module) *elfsym.Table {
	key := tableKey{kind: m.Kind, name: m.Name, buildID: string(m.BuildID), running: s.sameKernel}
	if m.Kind == ELF {
		fi, err := os.Stat(s.opts.Files.Path(m.Name))
		if err != nil {
			return nil
		}
		key.size, key.mtime = fi.Size(), fi.ModTime().UnixNano()
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			key.ino = st.Ino
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.entries[key]
	if e != nil && m.Kind == Kernel && time.Since(e.loaded) > KernelMaxAge {
		if e.table != nil {
			e.table.Close()
		}
		delete(c.entries, key)
		e = nil
	}
	if e == nil {
		e = &tableEntry{table: s.openTable(m), loaded: time.Now()}
		c.entries[key] = e
	}
	e.used = c.gen
	return e.table
}

// Sweep closes the tables that no Space has used in the last keep calls
// of Sweep: a file no process maps any more, or one that changed. Call it
// when no Space that uses the cache is in use.
func (c *TableCache) Sweep(keep uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, e := range c.entries {
		if c.gen-e.used >= keep {
			if e.table != nil {
				e.table.Close()
			}
			delete(c.entries, k)
		}
	}
	c.gen++
}

// Len is how many tables the cache holds, read or found missing.
func (c *TableCache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}

// Close closes every table.
func (c *TableCache) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, e := range c.entries {
		if e.table != nil {
			e.table.Close()
		}
		delete(c.entries, k)
	}
}
