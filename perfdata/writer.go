package perfdata

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"

	"github.com/jitprof/jitprof/internal/atomicfile"
)

// Options describe the file a Writer makes. Reader.Options gives those of
// the file read.
type Options struct {
	// Pipe writes pipe mode: the 16-byte header, then records only. Attrs
	// and features are records there (AttrRecord, FeatureRecord), so
	// Attrs and Features must be empty.
	Pipe bool
	// Attrs are the events, with their ids, written before the data.
	Attrs []*Attr
	// Features are the feature sections, written after the data in bit
	// order. AddBuildID extends the FeatureBuildID one.
	Features []Feature
}

// A Writer writes a perf.data file: header, attrs and their ids, the
// records given to it in order, then the feature sections.
//
// Create makes the file under a temporary name in the destination's
// directory and Close renames it into place, so the file appears complete
// or not at all, and a file already there (the input, say) is replaced,
// never written into.
type Writer struct {
	name string
	f    *os.File
	w    *bufio.Writer
	pipe bool

	attrs    []*Attr
	attrLen  int // of every attr in the file: the longest given
	features []Feature
	buildIDs []byte // entries AddBuildID appended, for the table

	dataOff int64
	written int64 // bytes of records
	buf     []byte
	err     error // sticky: the first write that failed
	closed  bool
}

// Create starts writing a perf.data file that Close will name name.
func Create(name string, opts Options) (*Writer, error) {
	if opts.Pipe && (len(opts.Attrs) > 0 || len(opts.Features) > 0) {
		return nil, errors.New("perfdata: a pipe-mode file has its attrs and features as records, not in Options")
	}
	features, err := sortedFeatures(opts.Features)
	if err != nil {
		return nil, err
	}
	w := &Writer{name: name, pipe: opts.Pipe, attrs: opts.Attrs, features: features}
	for _, a := range opts.Attrs {
		w.attrLen = max(w.attrLen, a.encodedLen())
	}

	var head []byte
	if w.pipe {
		head = le.AppendUint64(le.AppendUint64(nil, Magic), PipeHeaderSize)
	} else if head, err = w.layout(); err != nil {
		return nil, err
	}
	w.dataOff = int64(len(head))

	if w.f, err = atomicfile.CreateTemp(name); err != nil {
		return nil, fmt.Errorf("perfdata: %w", err)
	}
	w.w = bufio.NewWriterSize(w.f, streamBuffer)
	w.write(head)
	if w.err != nil {
		err := w.err
		w.Abort()
		return nil, err
	}
	return w, nil
}

// layout returns the start of a file: room for the header, which Close
// fills in, then each attr's ids, then the attrs, as perf lays them out.
func (w *Writer) layout() ([]byte, error) {
	b := make([]byte, FileHeaderSize)
	idOffs := make([]uint64, len(w.attrs))
	for i, a := range w.attrs {
		idOffs[i] = uint64(len(b))
		b = appendU64s(b, a.IDs...)
	}
	for i, a := range w.attrs {
		var err error
		if b, err = appendAttr(b, a, w.attrLen); err != nil {
			return nil, fmt.Errorf("perfdata: attr %d: %w", i, err)
		}
		b = appendU64s(b, idOffs[i], 8*uint64(len(a.IDs)))
	}
	return b, nil
}

func (w *Writer) write(b []byte) {
	if w.err != nil {
		return
	}
	if _, err := w.w.Write(b); err != nil {
		w.err = fmt.Errorf("perfdata: writing %s: %w", w.name, err)
	}
}

// WriteRaw appends a record as bytes, as RawRecord.Bytes or AppendRecord
// give it. After a write fails, every call returns that error.
func (w *Writer) WriteRaw(rec []byte) error {
	if w.err != nil {
		return w.err
	}
	if w.closed {
		return errClosed
	}
	if len(rec) < RecordHeaderSize {
		return fmt.Errorf("perfdata: %d bytes cannot hold a record header", len(rec))
	}
	if size := int(le.Uint16(rec[6:])); size < RecordHeaderSize || size > len(rec) {
		return fmt.Errorf("perfdata: %d bytes are not a record: its size field says %d", len(rec), size)
	}
	w.write(rec)
	w.written += int64(len(rec))
	return w.err
}

var errClosed = errors.New("perfdata: Writer is closed")

// WriteRecord appends a record encoded by AppendRecord.
func (w *Writer) WriteRecord(rec Record) error {
	var err error
	if w.buf, err = AppendRecord(w.buf[:0], rec); err != nil {
		return err
	}
	return w.WriteRaw(w.buf)
}

// Copy appends the records of r that remain, in file order, as they are.
// keep, when not nil, sees each record first: it may write records of its
// own (they land before the record), and says whether the record is
// copied. An error from keep or from reading ends the copy.
func (w *Writer) Copy(r *Reader, keep func(RawRecord) (bool, error)) error {
	for {
		rec, err := r.NextRaw()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if keep != nil {
			ok, err := keep(rec)
			if err != nil {
				return err
			}
			if !ok {
				continue
			}
		}
		if err := w.WriteRaw(rec.Bytes); err != nil {
			return err
		}
	}
}

// AddBuildID adds an entry to the build-id table, with MiscBuildIDSize set
// in its Misc. In pipe mode it writes it as a BuildIDRecord at once.
func (w *Writer) AddBuildID(e BuildID) error {
	e.Misc |= MiscBuildIDSize
	if w.pipe {
		return w.WriteRecord(&BuildIDRecord{BuildID: e})
	}
	b, err := appendBuildID(w.buildIDs, 0, &e)
	if err != nil {
		return fmt.Errorf("perfdata: %w", err)
	}
	w.buildIDs = b
	return nil
}

// AddFeature adds a feature section known only once the data is written
// (FeatureSampleTime), in place of any of its ID given before. A pipe has
// no feature sections.
func (w *Writer) AddFeature(f Feature) error {
	if w.pipe {
		return errors.New("perfdata: a pipe has no feature sections")
	}
	fs, err := sortedFeatures(append(slices.DeleteFunc(slices.Clone(w.features), func(g Feature) bool { return g.ID == f.ID }), f))
	if err != nil {
		return err
	}
	w.features = fs
	return nil
}

// Close writes the feature sections and the header and gives the file its
// name. If writing failed, Close removes the file and returns that error.
func (w *Writer) Close() error {
	if w.closed {
		return errClosed
	}
	if !w.pipe {
		w.writeTail()
	}
	if w.err == nil {
		if err := w.w.Flush(); err != nil {
			w.err = fmt.Errorf("perfdata: writing %s: %w", w.name, err)
		}
	}
	if w.err == nil && !w.pipe {
		w.writeHeader()
	}
	if w.err == nil {
		var err error
		if w.f.Name() != w.name { // not a device written in place
			err = w.f.Sync()
		}
		if err := errors.Join(err, atomicfile.Commit(w.f, w.name)); err != nil {
			w.err = fmt.Errorf("perfdata: writing %s: %w", w.name, err)
		}
	}
	w.closed = true
	if w.err != nil {
		atomicfile.Discard(w.f, w.name)
		return w.err
	}
	return nil
}

// Salvage ends a Writer whose writing failed, typically for lack of space,
// by keeping what reached the disk rather than removing it: the records
// that are there whole, the file cut after the last of them, and the header
// rewritten in place to say so. The feature sections are left out, since
// writing them would need space. The file is then named as Close names it.
// If even the attrs did not reach the disk, or the header cannot be
// written, Salvage removes the file and says why.
func (w *Writer) Salvage() error {
	if w.closed {
		return errClosed
	}
	w.closed = true
	err := w.salvage()
	if err != nil {
		atomicfile.Discard(w.f, w.name)
	}
	return err
}

func (w *Writer) salvage() error {
	fail := func(err error) error { return fmt.Errorf("perfdata: keeping what reached %s: %w", w.name, err) }
	end, err := w.f.Seek(0, io.SeekEnd)
	if err != nil {
		return fail(err)
	}
	if end < w.dataOff {
		return fail(fmt.Errorf("only %d of the %d bytes before the data are on disk", end, w.dataOff))
	}
	// Records were written in order, so the whole ones are those before
	// the first that the end of the file cuts.
	kept := w.dataOff
	br := bufio.NewReaderSize(io.NewSectionReader(w.f, w.dataOff, end-w.dataOff), streamBuffer)
	for {
		head, _ := br.Peek(RecordHeaderSize + 8)
		if len(head) < RecordHeaderSize {
			break
		}
		size := le.Uint16(head[6:])
		n := extent(head, size)
		if size < RecordHeaderSize || n > uint64(end-kept) {
			break
		}
		if _, err := br.Discard(int(n)); err != nil {
			return fail(err)
		}
		kept += int64(n)
	}
	if err := w.f.Truncate(kept); err != nil {
		return fail(err)
	}
	w.written, w.features, w.err = kept-w.dataOff, nil, nil
	if !w.pipe {
		w.writeHeader()
	}
	if w.err != nil {
		return w.err
	}
	if err := errors.Join(w.f.Sync(), w.f.Close()); err != nil {
		return fail(err)
	}
	if err := os.Rename(w.f.Name(), w.name); err != nil {
		return fail(err)
	}
	return nil
}

// Abort removes the file being written; the Writer cannot be used after.
// After Close it does nothing.
func (w *Writer) Abort() {
	if w.closed {
		return
	}
	w.closed = true
	atomicfile.Discard(w.f, w.name)
}

// writeTail writes the table of feature sections after the data, then the
// sections, one after the other.
func (w *Writer) writeTail() {
	if len(w.buildIDs) > 0 {
		i := slices.IndexFunc(w.features, func(f Feature) bool { return f.ID == FeatureBuildID })
		if i < 0 {
			w.features = append(w.features, Feature{ID: FeatureBuildID})
			w.features, _ = sortedFeatures(w.features)
			i = slices.IndexFunc(w.features, func(f Feature) bool { return f.ID == FeatureBuildID })
		}
		w.features[i].Data = slices.Concat(w.features[i].Data, w.buildIDs)
	}
	off := uint64(w.dataOff+w.written) + sectionSize*uint64(len(w.features))
	table := make([]byte, 0, sectionSize*len(w.features))
	for _, f := range w.features {
		table = appendU64s(table, off, uint64(len(f.Data)))
		off += uint64(len(f.Data))
	}
	w.write(table)
	for _, f := range w.features {
		w.write(f.Data)
	}
}

func (w *Writer) writeHeader() {
	entry := uint64(w.attrLen + sectionSize)
	attrsOff := uint64(w.dataOff) - entry*uint64(len(w.attrs))
	h := le.AppendUint64(nil, Magic)
	h = appendU64s(h, FileHeaderSize, entry,
		attrsOff, entry*uint64(len(w.attrs)),
		uint64(w.dataOff), uint64(w.written),
		0, 0)
	m := featureBitmap(w.features)
	h = appendU64s(h, m[:]...)
	if _, err := w.f.WriteAt(h, 0); err != nil {
		w.err = fmt.Errorf("perfdata: writing %s: %w", w.name, err)
	}
}
