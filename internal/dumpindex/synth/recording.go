package synth

import (
	"bytes"
	"os"

	"golang.org/x/sys/unix"

	"github.com/jitprof/jitprof/jitdump"
	"github.com/jitprof/jitprof/perfdata"
)

// Attr is the event of the recordings this package writes: a software
// event sampled with a period of 1, with the thread, time, period and call
// chain of each sample, on CLOCK_MONOTONIC as runtimes' dumps are.
var Attr = attr

// MarkerAddr is where a Recording maps the marker page of a dump.
const MarkerAddr = 0x7fff00000000

// A Recording is a small recording made by hand for a test: records
// added in time order, one time step each, written by Write.
type Recording struct {
	Now  uint64 // the last record's time
	recs []perfdata.Record
}

// NewRecording starts a recording at the clock's time now, so that dumps
// written after it load their code after its start.
func NewRecording() *Recording {
	return &Recording{Now: jitdump.Now()}
}

func (r *Recording) tick(pid, tid uint32) (perfdata.RecordHeader, perfdata.Trailer) {
	r.Now++
	return perfdata.RecordHeader{Attr: attr, Misc: perfdata.MiscUser}, perfdata.Trailer{Pid: pid, Tid: tid, Time: r.Now}
}

// Comm names thread tid of process pid.
func (r *Recording) Comm(pid, tid uint32, comm string) {
	h, tr := r.tick(pid, tid)
	h.Type = perfdata.TypeComm
	r.recs = append(r.recs, &perfdata.Comm{RecordHeader: h, Pid: pid, Tid: tid, Comm: comm, Trailer: tr})
}

// Map maps file (or "//anon") executable at [addr, addr+size) in pid.
func (r *Recording) Map(pid uint32, addr, size uint64, file string) {
	h, tr := r.tick(pid, pid)
	h.Type = perfdata.TypeMmap2
	r.recs = append(r.recs, &perfdata.Mmap2{RecordHeader: h, Pid: pid, Tid: pid, Addr: addr, Len: size,
		Prot: unix.PROT_READ | unix.PROT_EXEC, Flags: unix.MAP_PRIVATE, Filename: file, Trailer: tr})
}

// Marker maps a page of the dump at path, as a runtime does to point perf
// to it.
func (r *Recording) Marker(pid uint32, path string) {
	r.Map(pid, MarkerAddr, 0x1000, path)
}

// Sample adds a user-mode sample of pid's main thread at ip, called from
// callers (return addresses, innermost first).
func (r *Recording) Sample(pid uint32, ip uint64, callers ...uint64) {
	h, tr := r.tick(pid, pid)
	h.Type = perfdata.TypeSample
	r.recs = append(r.recs, &perfdata.Sample{RecordHeader: h, IP: ip, Pid: pid, Tid: pid, Time: tr.Time, Period: 1,
		Callchain: append([]uint64{perfdata.ContextUser, ip}, callers...)})
}

// Write writes the recording to path.
func (r *Recording) Write(path string) error {
	w, err := perfdata.Create(path, perfdata.Options{Attrs: []*perfdata.Attr{attr}})
	if err != nil {
		return err
	}
	for _, rec := range r.recs {
		if err := w.WriteRecord(rec); err != nil {
			w.Close()
			return err
		}
	}
	return w.Close()
}

// WriteDump writes the dump of process pid at path: what write writes with
// the dump's writer.
func WriteDump(path string, pid uint32, write func(*jitdump.Writer) error) error {
	var b bytes.Buffer
	w, err := jitdump.NewWriter(&b, jitdump.Header{Pid: pid})
	if err != nil {
		return err
	}
	if err := write(w); err != nil {
		return err
	}
	if err := w.Close(); err != nil {
		return err
	}
	return os.WriteFile(path, b.Bytes(), 0o644)
}
