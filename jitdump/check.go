package jitdump

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"slices"
)

// Severity tells how bad a Finding is.
type Severity int

const (
	// Warning: legal or common in real dumps, but worth knowing.
	Warning Severity = iota
	// Error: breaks the spec; tools will misread the dump.
	Error
)

func (s Severity) String() string {
	if s == Error {
		return "error"
	}
	return "warning"
}

// Finding kinds, stable names for grouping and filtering.
const (
	KindReservedFlags  = "reserved-flags"
	KindVersion        = "version"
	KindInvalidRecord  = "invalid-record" // fields do not fit the record
	KindCorrupt        = "corrupt"        // reading cannot go on
	KindSkipped        = "skipped"        // a corrupt record, skipped to the record after it
	KindTruncated      = "truncated"
	KindUnknownRecord  = "unknown-record"
	KindDuplicateIndex = "duplicate-index"
	KindMoveUnknown    = "move-unknown-index"
	KindMoveSize       = "move-size"
	KindTimeBackwards  = "time-backwards"
	KindDebugOutside   = "debug-outside-code"
	KindDebugName      = "debug-bad-name" // a DEBUG_INFO file name that is not text
	KindInlineUnknown  = "inline-unknown-index"
)

// Finding is one violation found by Check.
type Finding struct {
	Offset   int64
	Severity Severity
	Kind     string
	Msg      string
	// Dropped counts the DEBUG_INFO entries readers drop for this finding
	// (CodeLoad.BadEntry).
	Dropped int
}

func (f Finding) String() string {
	return fmt.Sprintf("offset %#x: %s: %s: %s", f.Offset, f.Severity, f.Kind, f.Msg)
}

// Check reads r to its end and returns what breaks the spec, in file order.
// The error is only for input that could not be read at all.
func Check(r *Reader) ([]Finding, error) {
	// No record is used past the next of its type (a DEBUG_INFO waits for
	// one CODE_LOAD at most): the reader's own, overwritten, for a dump of
	// millions of loads.
	reuse := r.ReuseRecord
	r.ReuseRecord = true
	defer func() { r.ReuseRecord = reuse }()
	var c checker
	h := r.Header()
	if extra := h.Flags &^ KnownFlags; extra != 0 {
		c.add(32, Error, KindReservedFlags, "reserved header flag bits %#x are set", extra)
	}
	if h.Version != 1 && h.Version != 2 {
		c.add(4, Warning, KindVersion, "header version %d (known: 1, 2)", h.Version)
	}
	for {
		rec, err := r.Next()
		if err != nil {
			var fe *FormatError
			switch {
			case err == io.EOF:
			case errors.Is(err, ErrTruncated):
				c.add(r.Offset(), Warning, KindTruncated, "the last record is cut short (the runtime may still be writing): %v", err)
			case errors.As(err, &fe):
				c.add(fe.Off, Error, KindCorrupt, "%s; the rest of the file is not read", fe.Msg)
			default:
				return c.findings, err
			}
			return c.findings, nil
		}
		c.record(rec)
	}
}

type checker struct {
	findings []Finding
	// The code sizes of the loads by code index. While the indexes grow,
	// as runtimes write them, runs of consecutive indexes and their sizes
	// in order: 4 bytes a load where runtimes count up by one (a map took
	// about 40 and grew slower than linearly in time); a map from the
	// first index that does not grow. A size fits 32 bits: the code is in
	// its record.
	runs     []indexRun
	sizes    []uint32
	loaded   map[uint64]uint32
	lastTime uint64
	pending  *DebugInfo // waits for the CODE_LOAD it describes
}

// indexRun is consecutive code indexes from first on, whose sizes start at
// sizes[at].
type indexRun struct {
	first uint64
	at    int
}

func (c *checker) add(off int64, s Severity, kind, format string, args ...any) {
	c.findings = append(c.findings, Finding{Offset: off, Severity: s, Kind: kind, Msg: fmt.Sprintf(format, args...)})
}

func (c *checker) record(rec Record) {
	h := rec.Header()
	if inv, ok := rec.(*Invalid); ok && inv.Skipped {
		c.add(h.Offset, Error, KindSkipped, "%s", inv.Err.Msg)
		c.pending = nil // what it described, if anything, is lost
		return
	}
	if h.Timestamp < c.lastTime {
		c.add(h.Offset, Warning, KindTimeBackwards, "%s timestamp %d is earlier than the previous record's %d", h.Type, h.Timestamp, c.lastTime)
	}
	c.lastTime = max(c.lastTime, h.Timestamp)

	switch r := rec.(type) {
	case *Invalid:
		c.add(h.Offset, Error, KindInvalidRecord, "%s", r.Err.Msg)
	case *Unknown:
		c.add(h.Offset, Warning, KindUnknownRecord, "record id %d (%d bytes) is not in the spec; readers skip it", uint32(h.Type), h.Size)
	case *DebugInfo:
		c.pending = r
	case *CodeLoad:
		if _, dup := c.size(r.CodeIndex); dup {
			c.add(h.Offset, Error, KindDuplicateIndex, "code_index %d of %q was already loaded", r.CodeIndex, r.Name)
		}
		c.load(r.CodeIndex, r.CodeSize)
		if c.pending != nil {
			c.debugOutside(c.pending, r)
			c.pending = nil
		}
	case *InlineInfo:
		if _, ok := c.size(r.CodeIndex); !ok {
			c.add(h.Offset, Error, KindInlineUnknown, "inlined %q refers to code_index %d, which no earlier CODE_LOAD has", r.Name, r.CodeIndex)
		}
	case *CodeMove:
		size, ok := c.size(r.CodeIndex)
		switch {
		case !ok:
			c.add(h.Offset, Error, KindMoveUnknown, "CODE_MOVE of code_index %d, which no earlier CODE_LOAD has", r.CodeIndex)
		case size != r.CodeSize:
			c.add(h.Offset, Error, KindMoveSize, "CODE_MOVE of code_index %d gives code_size %d, but it was loaded with %d", r.CodeIndex, r.CodeSize, size)
		}
	}
}

// load records the size of the code loaded with code index i.
func (c *checker) load(i, size uint64) {
	if c.loaded == nil {
		switch {
		case len(c.runs) > 0 && c.last()+1 == i && i != 0:
			c.sizes = append(c.sizes, uint32(size))
			return
		case len(c.runs) == 0 || c.last() < i:
			c.runs = append(c.runs, indexRun{i, len(c.sizes)})
			c.sizes = append(c.sizes, uint32(size))
			return
		}
		c.loaded = make(map[uint64]uint32, len(c.sizes)+1)
		for k, r := range c.runs {
			end := len(c.sizes)
			if k+1 < len(c.runs) {
				end = c.runs[k+1].at
			}
			for j, size := range c.sizes[r.at:end] {
				c.loaded[r.first+uint64(j)] = size
			}
		}
		c.runs, c.sizes = nil, nil
	}
	c.loaded[i] = uint32(size)
}

// last returns the greatest code index loaded, while they grow.
func (c *checker) last() uint64 {
	r := c.runs[len(c.runs)-1]
	return r.first + uint64(len(c.sizes)-r.at) - 1
}

// size returns the size of the code last loaded with code index i.
func (c *checker) size(i uint64) (uint64, bool) {
	if c.loaded != nil {
		size, ok := c.loaded[i]
		return uint64(size), ok
	}
	k, found := slices.BinarySearchFunc(c.runs, i, func(r indexRun, i uint64) int { return cmp.Compare(r.first, i) })
	if !found {
		if k == 0 {
			return 0, false
		}
		k-- // the run before, which may reach i
	}
	end := len(c.sizes)
	if k+1 < len(c.runs) {
		end = c.runs[k+1].at
	}
	r := c.runs[k]
	if j := i - r.first; j < uint64(end-r.at) {
		return uint64(c.sizes[r.at+int(j)]), true
	}
	return 0, false
}

// debugOutside reports the entries of d outside the code of the load they
// precede, and those whose file name is not text; it counts those readers
// drop (CodeLoad.BadEntry).
func (c *checker) debugOutside(d *DebugInfo, load *CodeLoad) {
	bias := load.LineBias()
	lo, hi := load.CodeAddr+bias, load.CodeAddr+load.CodeSize+bias
	outside, after, badName := 0, 0, 0
	var firstOutside uint64
	var firstName string
	for e := range d.Entries() {
		if e.Addr < lo || e.Addr > hi {
			if outside == 0 {
				firstOutside = e.Addr
			}
			outside++
		}
		switch load.BadEntry(e) {
		case "after-end":
			after++
		case "name":
			if badName == 0 {
				firstName = e.File
			}
			badName++
		}
	}
	if outside > 0 {
		c.add(d.Offset, Warning, KindDebugOutside, "%d of %d entries lie outside the code of %q [%#x, %#x] (bias %#x included), the first at %#x; %d after the end are dropped", outside, d.NumEntries, load.Name, lo, hi, bias, firstOutside, after)
		c.findings[len(c.findings)-1].Dropped = after
	}
	if badName > 0 {
		c.add(d.Offset, Warning, KindDebugName, "%d of %d entries of %q name a file that is not text, the first %q; dropped", badName, d.NumEntries, load.Name, firstName)
		c.findings[len(c.findings)-1].Dropped = badName
	}
}
