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
	// The code sizes of the loads by code index: a slice while the
	// indexes grow, as runtimes write them (16 bytes a load, where a map
	// took about 40 and grew slower than linearly in time), a map from
	// the first that does not.
	ordered  []loadedCode
	loaded   map[uint64]uint64
	lastTime uint64
	pending  *DebugInfo // waits for the CODE_LOAD it describes
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

// debugOutside reports the entries of d outside the code of the load they
// precede, and those whose file name is not text; it counts those readers
// drop (CodeLoad.BadEntry).
type loadedCode struct{ index, size uint64 }

// load records the size of the code loaded with code index i.
func (c *checker) load(i, size uint64) {
	if c.loaded == nil {
		if n := len(c.ordered); n == 0 || c.ordered[n-1].index < i {
			c.ordered = append(c.ordered, loadedCode{i, size})
			return
		}
		c.loaded = make(map[uint64]uint64, len(c.ordered)+1)
		for _, l := range c.ordered {
			c.loaded[l.index] = l.size
		}
		c.ordered = nil
	}
	c.loaded[i] = size
}

// size returns the size of the code last loaded with code index i.
func (c *checker) size(i uint64) (uint64, bool) {
	if c.loaded != nil {
		size, ok := c.loaded[i]
		return size, ok
	}
	k, ok := slices.BinarySearchFunc(c.ordered, i, func(l loadedCode, i uint64) int { return cmp.Compare(l.index, i) })
	if !ok {
		return 0, false
	}
	return c.ordered[k].size, true
}

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
