// Package synth writes synthetic JIT recordings for scale tests and
// benchmarks: a jitdump file of many tiny functions and a perf.data whose
// samples land in them, both made by the project's own writers
// (jitdump.NewWriter, perfdata.Create) at test time, so that no large file
// is kept in the repository.
package synth

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/jitprof/jitprof/jitdump"
	"github.com/jitprof/jitprof/perfdata"
)

// Pid lies beyond the largest pid_max (1<<22), so that no perf map or
// process of the machine answers for it.
const Pid = 1<<22 + 23

// Base is where the first function's code is; function i is at
// Base + CodeSize*i.
const Base = 0x10000000

// CodeSize is each function's size: a small loop.
const CodeSize = 16

// code is every function's body: a loop (x86-64 "dec ecx; jnz" padded
// with nops), the same bytes for each.
var code = [CodeSize]byte{0xff, 0xc9, 0x75, 0xfc, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0xc3}

// Options says what to write.
type Options struct {
	// Functions is how many functions the dump loads, each once.
	Functions int
	// Samples is how many samples the recording holds; sample i lands at
	// the start of function i mod Functions, so Samples >= Functions runs
	// them all.
	Samples int
	// Depth, when not 0, gives every sample a call chain of Depth
	// addresses inside the jitted code, each distinct from every other
	// sample's (as long as Samples*Depth <= Functions*CodeSize): the worst
	// case for a profile that keeps one location per address.
	Depth int
}

// Paths are the files Write made.
type Paths struct {
	Data, Dump string
}

var attr = &perfdata.Attr{
	Type: 1, SamplePeriod: 1,
	SampleType: perfdata.SampleIP | perfdata.SampleTID | perfdata.SampleTime | perfdata.SamplePeriod | perfdata.SampleCallchain,
	Flags: perfdata.AttrMmap | perfdata.AttrMmap2 | perfdata.AttrComm | perfdata.AttrTask |
		perfdata.AttrSampleIDAll | perfdata.AttrUseClockID,
	ClockID: unix.CLOCK_MONOTONIC,
	IDs:     []uint64{1},
}

// Write writes jit-<Pid>.dump and perf.data into dir.
func Write(dir string, o Options) (Paths, error) {
	p := Paths{Data: filepath.Join(dir, "perf.data"), Dump: filepath.Join(dir, fmt.Sprintf("jit-%d.dump", Pid))}
	if err := writeDump(p.Dump, o.Functions); err != nil {
		return p, err
	}
	return p, writeData(p, o)
}

func writeDump(path string, n int) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	buf := bufio.NewWriterSize(f, 1<<20)
	w, err := jitdump.NewWriter(buf, jitdump.Header{Pid: Pid})
	if err != nil {
		return err
	}
	var name []byte
	for i := range n {
		name = fmt.Appendf(name[:0], "f%d", i)
		fn := jitdump.Function{Name: string(name), Addr: Base + CodeSize*uint64(i), Code: code[:]}
		if _, err := w.Load(&fn); err != nil {
			return err
		}
	}
	if err := w.Close(); err != nil {
		return err
	}
	if err := buf.Flush(); err != nil {
		return err
	}
	return f.Close()
}

func writeData(p Paths, o Options) error {
	w, err := perfdata.Create(p.Data, perfdata.Options{Attrs: []*perfdata.Attr{attr}})
	if err != nil {
		return err
	}
	hdr := func(typ perfdata.RecordType) perfdata.RecordHeader {
		return perfdata.RecordHeader{Type: typ, Attr: attr, Misc: perfdata.MiscUser}
	}
	now := jitdump.Now()
	trailer := func() perfdata.Trailer {
		now++
		return perfdata.Trailer{Pid: Pid, Tid: Pid, Time: now}
	}
	head := []perfdata.Record{
		&perfdata.Comm{RecordHeader: hdr(perfdata.TypeComm), Pid: Pid, Tid: Pid, Comm: "synthjit", Trailer: trailer()},
		&perfdata.Mmap2{RecordHeader: hdr(perfdata.TypeMmap2), Pid: Pid, Tid: Pid, Addr: 0x7fff00000000, Len: 0x1000,
			Prot: unix.PROT_READ | unix.PROT_EXEC, Flags: unix.MAP_PRIVATE, Filename: p.Dump, Trailer: trailer()},
	}
	for _, r := range head {
		if err := w.WriteRecord(r); err != nil {
			w.Close()
			return err
		}
	}
	span := uint64(o.Functions) * CodeSize
	s := &perfdata.Sample{RecordHeader: hdr(perfdata.TypeSample), Pid: Pid, Tid: Pid, Period: 1}
	chain := make([]uint64, 0, o.Depth+2)
	next := uint64(0) // the next address of the deep chains, an offset in the code
	for i := range o.Samples {
		now++
		s.IP = Base + CodeSize*uint64(i%o.Functions)
		s.Time = now
		chain = append(chain[:0], perfdata.ContextUser, s.IP)
		for range o.Depth {
			// A caller's address is a return address, one past its call.
			chain = append(chain, Base+next%span+1)
			next++
		}
		s.Callchain = chain
		if err := w.WriteRecord(s); err != nil {
			w.Close()
			return err
		}
	}
	return w.Close()
}
