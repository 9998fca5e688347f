package perfprof_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/jitprof/jitprof/internal/dumpindex/synth"
	"github.com/jitprof/jitprof/internal/perfprof"
	"github.com/jitprof/jitprof/jitdump"
)

// TestUnnamed: a process whose samples land in anonymous memory no dump or
// perf map describes is pointed out (a runtime not asked to describe its
// code); one whose perf map names them is counted as named from it; one
// with a few such samples (a runtime's trampolines) is left alone.
func TestUnnamed(t *testing.T) {
	dir := t.TempDir()
	const unflagged, mapped, few, waits = synthPid, synthPid + 1, synthPid + 2, synthPid + 3
	const anon = 0x50000000
	// waits has a dump that describes one function; most of its samples
	// fall beyond it, in code its runtime has not written out yet.
	dumpPath := filepath.Join(dir, fmt.Sprintf("jit-%d.dump", waits))
	err := synth.WriteDump(dumpPath, waits, func(w *jitdump.Writer) error {
		_, err := w.Load(&jitdump.Function{Name: "described", Addr: anon, Code: bytes.Repeat([]byte{0x90}, 0x100)})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("perf-%d.map", mapped)), []byte("50000000 1000 Shares:Alpha (ulong,ulong)\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	rec := synth.NewRecording()
	for _, pid := range []uint32{unflagged, mapped, few, waits} {
		rec.Comm(pid, pid, "mono")
		rec.Map(pid, anon, 0x10000, "//anon")
	}
	rec.Marker(waits, dumpPath)
	samples := map[uint32]int{unflagged: 40, mapped: 30, few: 10, waits: 25}
	for _, pid := range []uint32{unflagged, mapped, few, waits} {
		ip := uint64(anon + 0x10)
		if pid == waits {
			ip = anon + 0x2000 // beyond the function its dump describes
		}
		for range samples[pid] {
			rec.Sample(pid, ip)
		}
	}
	data := filepath.Join(dir, "perf.data")
	if err := rec.Write(data); err != nil {
		t.Fatal(err)
	}
	res := run(t, perfprof.Options{Input: data})
	want := []perfprof.Unnamed{{Pid: unflagged, Comm: "mono", Samples: 40, Kept: 40}}
	if !slices.Equal(res.Unnamed, want) || res.PerfMapped != 30 {
		t.Errorf("unnamed %+v, %d named from perf maps; want %+v, 30", res.Unnamed, res.PerfMapped, want)
	}
	wantWaiting := []perfprof.Unnamed{{Pid: waits, Comm: "mono", Samples: 25, Kept: 25}}
	if !slices.Equal(res.Waiting, wantWaiting) {
		t.Errorf("waiting %+v, want %+v", res.Waiting, wantWaiting)
	}
}

// TestFIFOInput: a FIFO named as the recording is refused, not waited on
// (the recording is read twice, which a FIFO cannot be).
func TestFIFOInput(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "perf.data")
	if err := unix.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan error)
	go func() {
		_, err := perfprof.Run(perfprof.Options{Input: fifo})
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil {
			t.Error("a FIFO read as a recording")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("report waits on a FIFO")
	}
}
