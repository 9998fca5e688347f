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
	"slices"
	"strings"
	"unsafe"

	"github.com/jitprof/jitprof/internal/foreign"
	"github.com/jitprof/jitprof/internal/hostelf"
	"github.com/jitprof/jitprof/jitdump"
)

// Code is one CODE_LOAD with what the dump attached to it.
type Code struct {
	*jitdump.CodeLoad
	Debug  *jitdump.DebugInfo     // nil when the dump has no lines for it
	Unwind *jitdump.UnwindingInfo // nil when the dump has no unwinding data for it
	// Inlines are the method instances inlined into the function's code
	// (jitprof's extension record), in file order; see InlineChain.
	Inlines []*jitdump.InlineInfo

	file *jitdump.File // the dump, for Lines
	v8   *v8Index      // the dump's JavaScript functions, for InlineChain
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
// functions are kept in slabs, their names packed into shared blocks,
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
	codes   []Code // the slab the next function is taken from
	names   []byte // the block the next name is copied into
}

// move is a CODE_MOVE that followed the load of Functions[loads-1].
type move struct {
	loads int
	Event
}

// Slabs of functions and blocks of names: one allocation for many records,
// small enough to waste little on a small dump.
const (
	codeSlab  = 256
	nameBlock = 64 << 10
)

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
	// Taken before the mapping: a dump that grows meanwhile is read again.
	fi, err := file.Stat()
	if err != nil {
		file.Close()
		return nil, err
	}
	f, err := jitdump.OpenFile(file, src.String())
	if err != nil {
		return nil, err
	}
	d := &Dump{Path: src.String(), src: src, Header: f.Header(), file: f, size: fi.Size()}
	d.v8 = &v8Index{dump: d, positions: make(map[*Code][]v8Pos)}
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
	fi, err := file.Stat()
	if err != nil || fi.Size() <= d.size {
		file.Close()
		return false, err
	}
	f, err := jitdump.OpenFileAt(file, d.Path, d.end, d.file.LastTime())
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
		d.v8 = &v8Index{dump: d, positions: make(map[*Code][]v8Pos)}
		for _, fn := range d.Functions {
			fn.v8 = d.v8
		}
	}
	return true, nil
}

// read indexes d.file's records from where it stands.
func (d *Dump) read() {
	f := d.file
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
			d.debug = r
		case *jitdump.UnwindingInfo:
			d.unwind = r
		case *jitdump.CodeLoad:
			// A name is looked at for every sample in the function; kept
			// in the mapping it would bring a page of code back per name.
			r.Name = d.keepName(r.Name)
			fn := d.newCode()
			*fn = Code{CodeLoad: r, Debug: d.debug, Unwind: d.unwind, file: f, v8: d.v8}
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
			fn.Inlines = append(fn.Inlines, r)
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

// newCode returns a zero Code from the slab.
func (d *Dump) newCode() *Code {
	if len(d.codes) == 0 {
		d.codes = make([]Code, codeSlab)
	}
	fn := &d.codes[0]
	d.codes = d.codes[1:]
	return fn
}

// keepName returns a copy of name in the current block of names.
func (d *Dump) keepName(name string) string {
	if len(name) > nameBlock/8 {
		return strings.Clone(name) // a long one gets its own
	}
	if cap(d.names)-len(d.names) < len(name) {
		d.names = make([]byte, 0, nameBlock)
	}
	start := len(d.names)
	d.names = append(d.names, name...)
	return unsafe.String(unsafe.SliceData(d.names[start:]), len(name))
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
