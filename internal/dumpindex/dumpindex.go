// Package dumpindex turns the records of a jitdump file into what profilers
// need: the functions it describes, each with its code, source lines and
// unwinding data, and the events (loads and moves) that place them in
// memory over time.
package dumpindex

import (
	"cmp"
	"debug/elf"
	"errors"
	"io"
	"iter"
	"os"
	"slices"
	"unsafe"

	"github.com/jitprof/jitprof/internal/arena"
	"github.com/jitprof/jitprof/internal/foreign"
	"github.com/jitprof/jitprof/internal/hostelf"
	"github.com/jitprof/jitprof/internal/mapfile"
	"github.com/jitprof/jitprof/jitdump"
)

// Code is one CODE_LOAD with what the dump attached to it.
//
// It holds what its users need of the load, no more: a JIT may load
// millions of tiny functions, and a profiler keeps them all while it
// reads samples. The rest of the record (its header, vma) is not kept,
// and what few functions of most dumps have (lines, unwinding data,
// inlines) is behind one pointer.
type Code struct {
	Timestamp uint64 // of the load
	CodeAddr  uint64
	CodeSize  uint64
	CodeIndex uint64 // unique per load; CODE_MOVE refers to it
	Pid, Tid  uint32
	Name      string // the Dump's copy, valid after Close
	code      *byte  // CodeSize bytes in the dump's mapping; nil for none (see Code)
	extra     *attached
}

// NewCode returns load's function as a Dump holds it, for code that has
// a load but no dump to read it from (tests of what reads functions).
func NewCode(load *jitdump.CodeLoad) *Code {
	fn := codeOf(load)
	fn.Name = load.Name
	return &fn
}

// codeOf is what a Dump keeps of load but its name: its code as a
// pointer, 8 bytes where the slice's 24 were a quarter of a function's
// (the length is CodeSize, which the reader checks the record holds).
func codeOf(load *jitdump.CodeLoad) Code {
	fn := Code{Timestamp: load.Timestamp, CodeAddr: load.CodeAddr, CodeSize: load.CodeSize, CodeIndex: load.CodeIndex, Pid: load.Pid, Tid: load.Tid}
	if uint64(len(load.Code)) == load.CodeSize && load.CodeSize > 0 {
		fn.code = unsafe.SliceData(load.Code)
	}
	return fn
}

// Code returns fn's machine code, CodeSize bytes in the dump's mapping,
// or none when the load's record did not hold them. It must not be used
// after the Dump's Close.
func (fn *Code) Code() []byte {
	if fn.code == nil {
		return nil
	}
	return unsafe.Slice(fn.code, fn.CodeSize)
}

// attached is what a dump attached to a function besides its load.
type attached struct {
	debug   *jitdump.DebugInfo
	unwind  *jitdump.UnwindingInfo
	inlines []*jitdump.InlineInfo
	bias    uint64        // the load's jitdump.CodeLoad.LineBias
	file    *jitdump.File // the mapping the load is in, for Lines
	dump    *Dump         // for InlineChain
}

// Debug returns fn's DEBUG_INFO as indexed, nil when the dump has no lines
// for it.
func (fn *Code) Debug() *jitdump.DebugInfo {
	if fn.extra == nil {
		return nil
	}
	return fn.extra.debug
}

// Unwind returns fn's UNWINDING_INFO, nil when the dump has none for it.
func (fn *Code) Unwind() *jitdump.UnwindingInfo {
	if fn.extra == nil {
		return nil
	}
	return fn.extra.unwind
}

// Inlines returns the method instances inlined into fn's code (jitprof's
// extension record), in file order; see InlineChain.
func (fn *Code) Inlines() []*jitdump.InlineInfo {
	if fn.extra == nil {
		return nil
	}
	return fn.extra.inlines
}

// LineBias returns what the runtime added to the addresses of fn's
// DEBUG_INFO entries (jitdump.CodeLoad.LineBias).
func (fn *Code) LineBias() uint64 {
	if fn.extra == nil {
		return 0
	}
	return fn.extra.bias
}

// BadEntry tells why e, an entry of fn's DEBUG_INFO, cannot be right, or
// returns "" when it can (jitdump.CodeLoad.BadEntry).
func (fn *Code) BadEntry(e jitdump.DebugEntry) string {
	return jitdump.BadEntry(e, fn.LineBias(), fn.CodeAddr, fn.CodeSize)
}

// Event places a function at an address from a time on: its load, or a move.
type Event struct {
	Time     uint64
	Pid, Tid uint32
	Addr     uint64 // where the code starts from Time on
	Code     *Code  // the loaded function; for a move, the one moved
	Function int    // Code's place in Functions
	Move     bool
}

// Dump is a jitdump file read whole. Its records alias the file, which stays
// mapped until Close.
//
// Its index costs a fixed amount per function and no allocation of its
// own per record (a dump may hold millions of tiny functions): the
// functions are kept in slabs, the records read reused (what is kept of
// them is copied), their names packed into shared blocks,
// their loads are not kept twice as events, and code indexes are found by
// binary search while the dump gives them in increasing order, as runtimes
// do, with a map only for one that does not.
type Dump struct {
	Path      string // as given to Read, or its source's String
	src       foreign.Path
	Header    jitdump.Header
	Functions []*Code // in file order
	// Problems lists what was skipped: invalid records, corrupt ones skipped
	// to the record after them (jitdump.Invalid.Skipped), moves of unknown
	// code indexes, and the condition that ended reading early (truncation,
	// or corruption no record follows); the records before it are kept.
	Problems []error
	// Marks are the program's stage marks (jitdump Writer.Stage and
	// Accounting), in file order.
	Marks []*jitdump.StageMark
	// methods names methods by their runtime address (methods.go).
	methods methodIndex

	file *jitdump.File
	// mirror is what file and older map: jitprof's copy of the dump,
	// which its runtime cannot truncate under the mappings.
	mirror *mapfile.Mirror
	// What Extend goes on from: the mappings of earlier reads (their
	// records are in use), the functions by code index, a DEBUG_INFO and an
	// UNWINDING_INFO waiting for their CODE_LOAD, where reading stopped and
	// whether it can go on.
	older  []*jitdump.File
	debug  *jitdump.DebugInfo
	unwind *jitdump.UnwindingInfo
	end    int64
	size   int64 // of the file, at most what the last read saw
	ended  bool  // at corruption: nothing after it can be trusted
	v8     *v8Index

	// moves are the CODE_MOVEs, each after the loads before it in the
	// file: with Functions, the events in file order.
	moves []move
	// byIndex finds a function's place in Functions by code index once
	// the dump has given one out of increasing order (nil until then;
	// Functions are searched).
	byIndex map[uint64]int
	// The slabs the next function, attachment, DEBUG_INFO and
	// UNWINDING_INFO are taken from, the block the next name is copied
	// into.
	codes   slab[Code]
	extras  slab[attached]
	debugs  slab[jitdump.DebugInfo]
	unwinds slab[jitdump.UnwindingInfo]
	names   arena.Strings
}

// move is a CODE_MOVE that followed the load of Functions[loads-1].
type move struct {
	loads int
	Event
}

// slabBytes is the largest slab, a size class of Go's allocator: no bytes
// lost to rounding up, one allocation for many records.
const slabBytes = 32 << 10

// Read reads the dump at path.
//
// DEBUG_INFO and UNWINDING_INFO records belong to the next CODE_LOAD, by
// position, as the spec orders them and as perf reads them.
func Read(path string) (*Dump, error) { return ReadFrom(foreign.Plain(path)) }

// ReadFrom is Read of a dump opened under its rules: another process's, each
// time it is read.
func ReadFrom(src foreign.Path) (*Dump, error) {
	file, err := src.Open()
	if err != nil {
		return nil, err
	}
	defer file.Close()
	// Taken before the copy: a dump that grows meanwhile is read again.
	fi, err := file.Stat()
	if err != nil {
		return nil, err
	}
	mirror, err := mapfile.NewMirror()
	if err != nil {
		return nil, err
	}
	f, err := openCopy(mirror, file, src.String(), -1, 0)
	if err != nil {
		mirror.Close()
		return nil, err
	}
	d := &Dump{Path: src.String(), src: src, Header: f.Header(), file: f, mirror: mirror, size: fi.Size()}
	d.v8 = newV8Index(d)
	d.read()
	return d, nil
}

// Extend reads the records the runtime appended to the dump since it was
// read (by Read or the last Extend), a record cut short at the end then
// included: the Dump is then what Read would give now, the records read
// before unchanged. It tells whether there was anything new. A dump that
// ended at corruption is not read further.
func (d *Dump) Extend() (bool, error) {
	if d.ended {
		return false, nil
	}
	file, err := d.src.Open()
	if err != nil {
		return false, err
	}
	defer file.Close()
	fi, err := file.Stat()
	if err != nil || fi.Size() <= d.size {
		return false, err
	}
	f, err := openCopy(d.mirror, file, d.Path, d.end, d.file.LastTime())
	if err != nil {
		return false, err
	}
	d.size = fi.Size()
	// The cut-short record that ended the last read is read again.
	d.Problems = slices.DeleteFunc(d.Problems, func(err error) bool { return errors.Is(err, jitdump.ErrTruncated) })
	d.older = append(d.older, d.file)
	d.file = f
	n := len(d.Functions)
	d.read()
	if len(d.Functions) > n {
		// The JavaScript functions' index is built from all of them, once.
		d.v8 = newV8Index(d)
	}
	return true, nil
}

// openCopy brings mirror up to what file holds and opens it as the dump
// name: from its start (off < 0), or from off, the records after the time
// after.
func openCopy(mirror *mapfile.Mirror, file *os.File, name string, off int64, after uint64) (*jitdump.File, error) {
	mine, err := mirror.Grow(file)
	if err != nil {
		return nil, err
	}
	if off < 0 {
		return jitdump.OpenFile(mine, name)
	}
	return jitdump.OpenFileAt(mine, name, off, after)
}

// read indexes d.file's records from where it stands.
func (d *Dump) read() {
	f := d.file
	f.ReuseRecord = true
	defer func() { d.end = f.Offset() }()
	for {
		rec, err := f.Next()
		if err != nil {
			if err != io.EOF {
				d.Problems = append(d.Problems, err)
				d.ended = !errors.Is(err, jitdump.ErrTruncated)
			}
			f.Evict() // profiles touch few of the functions again
			return
		}
		switch r := rec.(type) {
		case *jitdump.DebugInfo:
			d.debug = d.debugs.take(*r)
		case *jitdump.UnwindingInfo:
			d.unwind = d.unwinds.take(*r)
		case *jitdump.CodeLoad:
			fn := d.codes.take(codeOf(r))
			// A name is looked at for every sample in the function;
			// kept in the mapping it would bring a page of code back per
			// name.
			fn.Name = d.names.Clone(r.Name)
			if bias := r.LineBias(); d.debug != nil || d.unwind != nil || bias != 0 {
				fn.extra = d.extras.take(attached{debug: d.debug, unwind: d.unwind, bias: bias, file: f, dump: d})
			}
			d.debug, d.unwind = nil, nil
			d.index(fn)
		case *jitdump.CodeMove:
			k := d.code(r.CodeIndex)
			if k < 0 {
				d.Problems = append(d.Problems, &jitdump.FormatError{File: d.Path, Off: r.Offset, Msg: "CODE_MOVE of a code_index no CODE_LOAD has; skipped"})
				continue
			}
			d.moves = append(d.moves, move{len(d.Functions), Event{Time: r.Timestamp, Pid: r.Pid, Tid: r.Tid, Addr: r.NewCodeAddr, Code: d.Functions[k], Function: k, Move: true}})
		case *jitdump.StageMark:
			d.Marks = append(d.Marks, r)
		case *jitdump.MethodNames:
			d.methods.add(r)
		case *jitdump.InlineInfo:
			k := d.code(r.CodeIndex)
			if k < 0 {
				d.Problems = append(d.Problems, &jitdump.FormatError{File: d.Path, Off: r.Offset, Msg: "inline record of a code_index no CODE_LOAD has; skipped"})
				continue
			}
			fn := d.Functions[k]
			if fn.extra == nil {
				fn.extra = d.extras.take(attached{file: f, dump: d})
			}
			fn.extra.inlines = append(fn.extra.inlines, r)
		case *jitdump.Invalid:
			d.Problems = append(d.Problems, r.Err)
			if r.Skipped || r.Type == jitdump.TypeCodeLoad {
				// The load they were for is lost: they must not
				// describe the next.
				d.debug, d.unwind = nil, nil
			}
		}
	}
}

// slab hands out values of T from arrays of them, one allocation for
// many, which start small (a dump may have few functions, and few of them
// lines) and double up to slabBytes.
type slab[T any] struct {
	free []T
	size int // of the last array
}

// take returns a copy of v in the slab.
func (s *slab[T]) take(v T) *T {
	if len(s.free) == 0 {
		s.size = min(max(2*s.size, 8), slabBytes/int(unsafe.Sizeof(v)))
		s.free = make([]T, s.size)
	}
	p := &s.free[0]
	s.free = s.free[1:]
	*p = v
	return p
}

// index adds fn to Functions and to what finds it by code index: a later
// load of the same index hides an earlier one.
func (d *Dump) index(fn *Code) {
	n := len(d.Functions)
	if d.byIndex == nil && n > 0 && d.Functions[n-1].CodeIndex >= fn.CodeIndex {
		d.byIndex = make(map[uint64]int, n+1)
		for k, old := range d.Functions {
			d.byIndex[old.CodeIndex] = k
		}
	}
	if d.byIndex != nil {
		d.byIndex[fn.CodeIndex] = n
	}
	d.Functions = append(d.Functions, fn)
}

// code returns the place in Functions of the function last loaded with
// code index i, or -1.
func (d *Dump) code(i uint64) int {
	if d.byIndex != nil {
		if k, ok := d.byIndex[i]; ok {
			return k
		}
		return -1
	}
	k, ok := slices.BinarySearchFunc(d.Functions, i, func(fn *Code, i uint64) int { return cmp.Compare(fn.CodeIndex, i) })
	if !ok {
		return -1
	}
	return k
}

// Events returns the loads and moves of the dump's functions in file
// order, each with its index in that order.
func (d *Dump) Events() iter.Seq2[int, Event] {
	return func(yield func(int, Event) bool) {
		i, m := 0, 0
		for k, fn := range d.Functions {
			for ; m < len(d.moves) && d.moves[m].loads <= k; m++ {
				if !yield(i, d.moves[m].Event) {
					return
				}
				i++
			}
			if !yield(i, Event{Time: fn.Timestamp, Pid: fn.Pid, Tid: fn.Tid, Addr: fn.CodeAddr, Code: fn, Function: k}) {
				return
			}
			i++
		}
		for _, mv := range d.moves[m:] {
			if !yield(i, mv.Event) {
				return
			}
			i++
		}
	}
}

// EventCount returns how many events Events yields.
func (d *Dump) EventCount() int { return len(d.Functions) + len(d.moves) }

// Truncated tells whether reading ended inside a cut-short last record.
func (d *Dump) Truncated() bool {
	for _, p := range d.Problems {
		if errors.Is(p, jitdump.ErrTruncated) {
			return true
		}
	}
	return false
}

// Mappings returns how many mappings of the file the Dump holds: one, and
// one more for each Extend that found records.
func (d *Dump) Mappings() int { return len(d.older) + 1 }

// Evict drops the dump's pages from the process's resident memory (see
// jitdump.File.Evict): for a Dump kept for long, after a use that touched
// some of its functions' code.
func (d *Dump) Evict() {
	d.file.Evict()
	for _, f := range d.older {
		f.Evict()
	}
}

// Close releases the file; the Dump's records must not be used after it.
func (d *Dump) Close() error {
	errs := []error{d.file.Close()}
	for _, f := range d.older {
		errs = append(errs, f.Close())
	}
	errs = append(errs, d.mirror.Close())
	return errors.Join(errs...)
}

// Machine returns the machine the dump's code is for. The specification's
// elf_mach 0 means the machine that recorded, taken to be this one.
func (d *Dump) Machine() elf.Machine {
	if m := elf.Machine(d.Header.ElfMach); m != elf.EM_NONE {
		return m
	}
	m, _ := hostelf.Machine()
	return m
}
