package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jitprof/jitprof/internal/fixtures"
	"github.com/jitprof/jitprof/perfdata"
	"golang.org/x/sys/unix"
)

// TestArchive: a recording archived, with its own files then gone, reads
// in an empty directory as it read where it was made: report (text and
// call graph, jitted and native frames named), annotate of a jitted
// function, and gprof's files.
func TestArchive(t *testing.T) {
	fixtures.RealTier(t, "recording minijit")
	made := t.TempDir()
	bin := filepath.Join(made, "minijit")
	if err := os.Rename(fixtures.BuildTestJIT(t), bin); err != nil {
		t.Fatal(err)
	}
	t.Chdir(made)
	rec := filepath.Join(made, "rec")
	if code, _, stderr := jitprofMsg(t, "record", "-q", "-g", "-F", "999", "-o", rec+"/", "--", bin, "-duration", "0.3s"); code != 0 {
		t.Fatalf("record: exit %d\n%s", code, stderr)
	}
	data := filepath.Join(rec, "perf.data")
	reports := [][]string{
		{"report", "-q", "--children", "-g"},
		{"report", "-q", "--sort", "dso,sym"},
		{"annotate", "-q", "jit:loop_a"},
	}
	var before []string
	for _, args := range reports {
		code, out := jitprof(t, append(args, "-i", data)...)
		if code != 0 || !strings.Contains(out, "jit:loop_a") {
			t.Fatalf("%s here: exit %d\n%.1000s", args[0], code, out)
		}
		before = append(before, out)
	}
	if !strings.Contains(before[0], "main.main") {
		t.Fatalf("no native frame named here:\n%.2000s", before[0])
	}

	ar := filepath.Join(t.TempDir(), "rec.tar.gz")
	if code, _, stderr := jitprofMsg(t, "archive", "-i", data, "-o", ar); code != 0 || !strings.Contains(stderr, "files"+made+"/minijit") {
		t.Fatalf("archive: exit %d\n%s", code, stderr)
	}
	if err := os.RemoveAll(made); err != nil {
		t.Fatal(err)
	}
	elsewhere := t.TempDir()
	t.Chdir(elsewhere)
	for i, args := range reports {
		code, out := jitprof(t, append(args, "-i", ar)...)
		if code != 0 || out != before[i] {
			t.Errorf("%s of the archive: exit %d, differs from the report where it was made:\n%.2000s", args[0], code, out)
		}
	}
	if code, out := jitprof(t, "report", "-q", "-g", "--format", "gmon", "-o", filepath.Join(elsewhere, "gprof"), "-i", ar); code != 0 {
		t.Errorf("gmon of the archive: exit %d\n%s", code, out)
	}
	if left, _ := filepath.Glob(filepath.Join(os.TempDir(), "jitprof-archive-*")); len(left) > 0 {
		t.Errorf("unpacked archives left behind: %q", left)
	}
}

// mainEnv makes the test binary run jitprof's main instead of the tests,
// for the tests that signal a jitprof of its own.
const mainEnv = "JITPROF_TEST_RUN_MAIN"

func init() {
	if os.Getenv(mainEnv) != "" {
		main()
		os.Exit(0)
	}
}

// manyProcesses writes a recording of n processes, each with a name of its
// own and one sample: a report with a line for each.
func manyProcesses(t *testing.T, n int) []byte {
	t.Helper()
	attr := &perfdata.Attr{Type: 1, SamplePeriod: 1,
		SampleType: perfdata.SampleIP | perfdata.SampleTID | perfdata.SampleTime | perfdata.SamplePeriod,
		Flags:      perfdata.AttrMmap2 | perfdata.AttrSampleIDAll | perfdata.AttrComm | perfdata.AttrUseClockID, ClockID: unix.CLOCK_MONOTONIC, IDs: []uint64{1}}
	path := filepath.Join(t.TempDir(), "perf.data")
	w, err := perfdata.Create(path, perfdata.Options{Attrs: []*perfdata.Attr{attr}})
	if err != nil {
		t.Fatal(err)
	}
	for i := range uint32(n) {
		pid := 1<<23 + i
		trailer := perfdata.Trailer{Pid: pid, Tid: pid, Time: 1}
		for _, r := range []perfdata.Record{
			&perfdata.Comm{RecordHeader: perfdata.RecordHeader{Type: perfdata.TypeComm, Attr: attr}, Pid: pid, Tid: pid, Comm: fmt.Sprintf("process-%d", i), Trailer: trailer},
			&perfdata.Sample{RecordHeader: perfdata.RecordHeader{Type: perfdata.TypeSample, Attr: attr, Misc: perfdata.MiscUser}, IP: 0x400000, Pid: pid, Tid: pid, Time: 2, Period: 1},
		} {
			if err := w.WriteRecord(r); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestReportArchiveSignalled: Ctrl-C or SIGTERM to a report of an archive,
// while it unpacks or while it writes its report, removes what it unpacked
// and ends it at once, as the signal does.
func TestReportArchiveSignalled(t *testing.T) {
	// The report is more than a pipe holds, so that jitprof waits to
	// write it, the archive unpacked, until the signal.
	recording := manyProcesses(t, 4000)
	// A file before the recording, stored, not compressed: the bounds let
	// it through, and unpacking it takes a while.
	ar := filepath.Join(t.TempDir(), "big.tar.gz")
	f, err := os.Create(ar)
	if err != nil {
		t.Fatal(err)
	}
	gz, _ := gzip.NewWriterLevel(f, gzip.NoCompression)
	tw := tar.NewWriter(gz)
	const bigSize = 64 << 20
	for _, m := range []struct {
		name string
		size int64
		r    io.Reader
	}{{"files/usr/lib/libbig.so", bigSize, rand.NewChaCha8([32]byte{})}, {"perf.data", int64(len(recording)), bytes.NewReader(recording)}} {
		if err := tw.WriteHeader(&tar.Header{Name: m.name, Typeflag: tar.TypeReg, Mode: 0o600, Size: m.size}); err != nil {
			t.Fatal(err)
		}
		if _, err := io.CopyN(tw, m.r, m.size); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []io.Closer{tw, gz, f} {
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name   string
		sig    syscall.Signal
		during string // "unpacking": signalled when the directory appears; "reporting": once the report is being written
	}{
		{"Ctrl-C while unpacking", syscall.SIGINT, "unpacking"},
		{"SIGTERM while unpacking", syscall.SIGTERM, "unpacking"},
		{"Ctrl-C while reporting", syscall.SIGINT, "reporting"},
		{"SIGTERM while reporting", syscall.SIGTERM, "reporting"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tmp := t.TempDir()
			cmd := exec.Command(os.Args[0], "report", "-i", ar)
			cmd.Env = append(os.Environ(), mainEnv+"=1", "TMPDIR="+tmp)
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			defer cmd.Process.Kill()
			var unpackedRecording bool
			switch tc.during {
			case "unpacking":
				for {
					if dirs, _ := filepath.Glob(filepath.Join(tmp, "jitprof-archive-*")); len(dirs) > 0 {
						_, err := os.Stat(filepath.Join(dirs[0], "perf.data"))
						unpackedRecording = err == nil
						break
					}
					time.Sleep(time.Millisecond)
				}
			case "reporting":
				if _, err := io.ReadFull(stdout, make([]byte, 1)); err != nil {
					t.Fatalf("no report: %v", err)
				}
			}
			signalled := time.Now()
			if err := cmd.Process.Signal(tc.sig); err != nil {
				t.Fatal(err)
			}
			select {
			case <-exited:
			case <-time.After(2 * time.Second):
				t.Fatalf("jitprof runs on 2 s after %v", tc.sig)
			}
			t.Logf("%v ended jitprof in %v", tc.sig, time.Since(signalled))
			if unpackedRecording {
				t.Errorf("signalled after the unpacking: the case is not what it says")
			}
			if ws := cmd.ProcessState.Sys().(syscall.WaitStatus); !ws.Signaled() || ws.Signal() != tc.sig {
				t.Errorf("jitprof ended %v, want by %v", cmd.ProcessState, tc.sig)
			}
			if left, _ := os.ReadDir(tmp); len(left) > 0 {
				t.Errorf("left behind in TMPDIR: %v", left)
			}
		})
	}
}
