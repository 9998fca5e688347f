// Package dumpindex turns the records of a jitdump file into what profilers
// need: the functions it describes, each with its code, source lines and
// unwinding data, and the events (loads and moves) that place them in
// memory over time.
package dumpindex

import (
	"debug/elf"
	"errors"
	"io"
	"slices"
	"strings"

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
	Move     bool
}

// Dump is a jitdump file read whole. Its records alias the file, which stays
// mapped until Close.
type Dump struct {
	Path      string // as given to Read, or its source's String
	src       foreign.Path
	Header    jitdump.Header
	Functions []*Code // in file order
	Events    []Event // in file order
	// Problems lists what was skipped: invalid records, corrupt ones skipped
	// to the record after them (jitdump.Invalid.Skipped), moves of unknown
	// code indexes, and the condition that ended reading early (truncation,
	// or corruption no record follows); the records before it are kept.
	Problems []error
	// Marks are the program's stage marks (jitdump Writer.Stage and
	// Accounting), in file order.
	Marks []*jitdump.StageMark

	file *jitdump.File
	// What Extend goes on from: the mappings of earlier reads (their
	// records are in use), the functions by code index, a DEBUG_INFO and an
	// UNWINDING_INFO waiting for their CODE_LOAD, where reading stopped and
	// whether it can go on.
	older   []*jitdump.File
	byIndex map[uint64]*Code
	debug   *jitdump.DebugInfo
	unwind  *jitdump.UnwindingInfo
	end     int64
	size    int64 // of the file, at most what the last read saw
	ended   bool  // at corruption: nothing after it can be trusted
	v8      *v8Index
}

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
	d := &Dump{Path: src.String(), src: src, Header: f.Header(), file: f, byIndex: make(map[uint64]*Code), size: fi.Size()}
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
			r.Name = strings.Clone(r.Name)
			fn := &Code{CodeLoad: r, Debug: d.debug, Unwind: d.unwind, file: f, v8: d.v8}
			d.debug, d.unwind = nil, nil
			d.Functions = append(d.Functions, fn)
			d.byIndex[r.CodeIndex] = fn
			d.Events = append(d.Events, Event{Time: r.Timestamp, Pid: r.Pid, Tid: r.Tid, Addr: r.CodeAddr, Code: fn})
		case *jitdump.CodeMove:
			fn := d.byIndex[r.CodeIndex]
			if fn == nil {
				d.Problems = append(d.Problems, &jitdump.FormatError{File: d.Path, Off: r.Offset, Msg: "CODE_MOVE of a code_index no CODE_LOAD has; skipped"})
				continue
			}
			d.Events = append(d.Events, Event{Time: r.Timestamp, Pid: r.Pid, Tid: r.Tid, Addr: r.NewCodeAddr, Code: fn, Move: true})
		case *jitdump.StageMark:
			d.Marks = append(d.Marks, r)
		case *jitdump.InlineInfo:
			fn := d.byIndex[r.CodeIndex]
			if fn == nil {
				d.Problems = append(d.Problems, &jitdump.FormatError{File: d.Path, Off: r.Offset, Msg: "inline record of a code_index no CODE_LOAD has; skipped"})
				continue
			}
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
