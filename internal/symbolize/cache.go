package symbolize

import (
	"maps"
	"sync"
	"syscall"
	"time"

	"github.com/jitprof/jitprof/internal/elfsym"
	"github.com/jitprof/jitprof/internal/foreign"
	"github.com/jitprof/jitprof/internal/unwind"
)

// TableCache keeps the symbol tables of ELF files, the kernel and the vDSO,
// and the files' call frame information, from one Space to the next, for
// a caller that builds many Spaces of one machine (jitprof agent builds one
// per window): reading node's or libjvm.so's symbols again for every
// window would cost more than all the sampling. An ELF file is read again
// when it changes (its inode, size or modification time), the kernel's
// symbols every KernelMaxAge (modules come and go).
//
// It keeps processes' perf maps too, read and placed (a JIT's perf map can
// hold a hundred thousand lines), until the map or its times file changes.
type TableCache struct {
	mu       sync.Mutex
	gen      uint64
	entries  map[tableKey]*tableEntry
	perfMaps map[string]*perfMapEntry // by path
}

// fileVersion tells a file's versions apart; the zero value is no file.
type fileVersion struct {
	ino         uint64
	size, mtime int64
}

func versionOf(src foreign.Path) (fileVersion, error) {
	f, err := src.Open()
	if err != nil {
		return fileVersion{}, err
	}
	fi, err := f.Stat()
	f.Close()
	if err != nil {
		return fileVersion{}, err
	}
	v := fileVersion{size: fi.Size(), mtime: fi.ModTime().UnixNano()}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		v.ino = st.Ino
	}
	return v, nil
}

// perfMapEntry is the last version read of a perf map: a map that grows
// is kept once, not once a version.
type perfMapEntry struct {
	perfMap, times fileVersion
	module         *Module
	used           uint64
}

// KernelMaxAge is how long the kernel's symbols are kept before they are
// read again.
const KernelMaxAge = 10 * time.Minute

type tableKey struct {
	kind    Kind
	name    string
	buildID string
	// recorded is the identity the recording gave an ELF file without a
	// build-id: the same version of the file may be the one mapped in one
	// process and not in another.
	recorded elfsym.FileID
	running  bool        // for the kernel and vDSO: the running kernel's
	file     fileVersion // for an ELF file
	ns       string      // Module.ns: whose root the file is read in
}

// tableEntry is what is known of a file: its symbols and its call frame
// information, each read on first use.
type tableEntry struct {
	table  lazy[elfsym.Table]
	unwind lazy[unwind.Table]
	used   uint64 // the generation that last used it
	loaded time.Time
}

// close closes the entry's symbol table (call frame information holds no
// file open).
func (e *tableEntry) close() {
	if e.table.v != nil {
		e.table.v.Close()
	}
}

// lazy is a table of an entry's file once read: nil when there is none to
// use, which is kept too.
type lazy[T any] struct {
	v    *T
	read bool
}

// NewTableCache returns an empty cache.
func NewTableCache() *TableCache {
	return &TableCache{entries: make(map[tableKey]*tableEntry), perfMaps: make(map[string]*perfMapEntry)}
}

// perfMap returns the module read reads from the perf map at src, timed by
// timesFile, read again only when the map or its times file changed; nil
// when there is no map there. A nil cache reads it every time.
func (c *TableCache) perfMap(src, timesFile foreign.Path, read func(src, times foreign.Path) *Module) *Module {
	if c == nil {
		return read(src, timesFile)
	}
	version, err := versionOf(src)
	if err != nil {
		return nil
	}
	times, _ := versionOf(timesFile) // none: the zero version
	path := src.String() + "\x00" + timesFile.String()
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.perfMaps[path]
	if e == nil || e.perfMap != version || e.times != times {
		m := read(src, timesFile)
		if m == nil {
			return nil
		}
		e = &perfMapEntry{perfMap: version, times: times, module: m}
		c.perfMaps[path] = e
	}
	e.used = c.gen
	return e.module
}

// get returns m's symbol table for s, reading it on first use.
func (c *TableCache) get(s *Space, m *Module) *elfsym.Table {
	return cached(c, s, m, func(e *tableEntry) *lazy[elfsym.Table] { return &e.table }, s.openTable)
}

// unwindTable returns m's call frame information for s, reading it on
// first use: a DWARF window unwinds through the same libraries as the one
// before. A nil cache reads it every time.
func (c *TableCache) unwindTable(s *Space, m *Module) *unwind.Table {
	if c == nil {
		return s.loadUnwind(m)
	}
	return cached(c, s, m, func(e *tableEntry) *lazy[unwind.Table] { return &e.unwind }, s.loadUnwind)
}

// cached returns the table of m's entry that slot picks, reading it with
// read on first use; nil when m's file is gone.
func cached[T any](c *TableCache, s *Space, m *Module, slot func(*tableEntry) *lazy[T], read func(*Module) *T) *T {
	// Where the file is, and which version, is found before the lock:
	// opening it, in a container's root too, is file work that would
	// stall every other lookup.
	key, ok := keyOf(s, m)
	if !ok {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.entry(key, m)
	l := slot(e)
	if !l.read {
		l.v, l.read = read(m), true
	}
	return l.v
}

// keyOf returns the key of m's entry; false when m's file is gone.
func keyOf(s *Space, m *Module) (tableKey, bool) {
	key := tableKey{kind: m.Kind, name: m.Name, buildID: string(m.BuildID), recorded: m.File, running: s.sameKernel, ns: m.ns}
	if m.Kind == ELF {
		var err error
		at, _ := s.recorded(m)
		if key.file, err = versionOf(at(m.Name)); err != nil {
			return key, false
		}
	}
	return key, true
}

// entry returns the entry of key, m's, made on first use and marked used.
// c.mu is held.
func (c *TableCache) entry(key tableKey, m *Module) *tableEntry {
	e := c.entries[key]
	if e != nil && m.Kind == Kernel && time.Since(e.loaded) > KernelMaxAge {
		e.close()
		delete(c.entries, key)
		e = nil
	}
	if e == nil {
		e = &tableEntry{loaded: time.Now()}
		c.entries[key] = e
	}
	e.used = c.gen
	return e
}

// Sweep closes the tables that no Space has used in the last keep calls
// of Sweep: a file no process maps any more, or one that changed. Call it
// when no Space that uses the cache is in use.
func (c *TableCache) Sweep(keep uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, e := range c.entries {
		if c.gen-e.used >= keep {
			e.close()
			delete(c.entries, k)
		}
	}
	maps.DeleteFunc(c.perfMaps, func(_ string, e *perfMapEntry) bool { return c.gen-e.used >= keep })
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
		e.close()
		delete(c.entries, k)
	}
}
