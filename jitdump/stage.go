package jitdump

import (
	"bytes"
	"encoding/binary"
)

// TypeStageMark is jitprof's extension record, outside the spec: a mark the
// program puts in its dump to split its run into named stages and to switch
// the profiler's accounting off and on, as Kaffe's xprof let Java code do.
// perf skips a record of an id it does not know, with a warning, and goes on;
// the id is far above the spec's ids so that future spec records cannot
// collide with it.
//
// Layout after the record header:
//
//	u32 flags       bit 0: accounting is on
//	u32 reserved    0
//	char name[]     the stage in force from this record's timestamp on, NUL-terminated
//
// Each mark carries the whole state, not a change, so a reader that meets
// any mark knows the state without having to fold the ones before it.
const TypeStageMark RecordType = 0x4A500010

// stageFlagAccounting is flags bit 0.
const stageFlagAccounting = 1 << 0

const stageMarkFixed = RecordHeaderSize + 8 // flags, reserved

// StageMark says that from its timestamp on the program is in stage Name
// ("" before the program names any) and samples count only while Accounting
// is true. Before a dump's first mark, the stage is "" and accounting is on.
type StageMark struct {
	RecordHeader
	Name       string
	Accounting bool
}

// Stage starts a stage called name: samples from now until the next call
// belong to it, and a report can be limited to it by its name. Accounting
// stays as it was. Stage names need not be unique; a name used again adds
// to the same stage.
func (w *Writer) Stage(name string) error {
	return w.mark(func() { w.stage = name })
}

// Accounting switches the profiler's accounting on or off from now on:
// samples taken while it is off are left out of reports, as with Kaffe's
// XProfiler.on() and off(). Code loaded while it is off is still recorded,
// so later samples in it are named.
func (w *Writer) Accounting(on bool) error {
	return w.mark(func() { w.accountingOff = !on })
}

// mark updates the writer's stage state under its lock and writes the new
// state as a mark.
func (w *Writer) mark(update func()) error {
	now := Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return w.err
	}
	update()
	m := StageMark{RecordHeader: RecordHeader{Timestamp: now}, Name: w.stage, Accounting: !w.accountingOff}
	w.buf = appendStageMark(w.buf, w.order, &m)
	return w.spill()
}

func appendStageMark(b []byte, o binary.ByteOrder, r *StageMark) []byte {
	b, p := beginRecord(b, o, &r.RecordHeader, TypeStageMark, stageMarkFixed+len(r.Name)+1)
	var flags uint32
	if r.Accounting {
		flags |= stageFlagAccounting
	}
	o.PutUint32(p[RecordHeaderSize:], flags)
	copy(p[stageMarkFixed:], r.Name)
	return b
}

// decodeStageMark decodes a record that decode has checked holds its fixed fields.
func decodeStageMark(h RecordHeader, b []byte, o binary.ByteOrder, invalid func(string, ...any) Record) Record {
	flags := o.Uint32(b[RecordHeaderSize:])
	rest := b[stageMarkFixed:]
	nul := bytes.IndexByte(rest, 0)
	if nul < 0 {
		return invalid("stage name has no terminating NUL within the record")
	}
	return &StageMark{RecordHeader: h, Name: aliasString(rest[:nul]), Accounting: flags&stageFlagAccounting != 0}
}
