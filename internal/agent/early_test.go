package agent

import (
	"bytes"
	"fmt"
	"github.com/jitprof/jitprof/internal/jitwatch"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jitprof/jitprof/jitdump"
	"golang.org/x/sys/unix"
)

// TestEarlyWindows: every window symbolized before a dump it needs caught
// up is both counted as early and logged, one line each, whether the dump
// is where its process wrote it (named as perf has it, or as
// JavaScriptCore names it) or the watcher's copy of a container's;
// the first line about a dump explains, a window whose dump caught up is
// neither.
func TestEarlyWindows(t *testing.T) {
	pid := uint32(os.Getpid()) // alive: its dump is waited for
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		t.Fatal(err)
	}
	now := uint64(ts.Nano()) // the process ran by then, as the agent checks
	var buf bytes.Buffer
	w, err := jitdump.NewWriter(&buf, jitdump.Header{Pid: pid, Timestamp: 1})
	if err != nil {
		t.Fatal(err)
	}
	load := &jitdump.CodeLoad{RecordHeader: jitdump.RecordHeader{Timestamp: now}, Pid: pid, Tid: pid, VMA: 4096, CodeAddr: 4096, CodeSize: 4,
		CodeIndex: 1, Name: "f", Code: []byte{1, 2, 3, 4}}
	if err := w.WriteRecord(load); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		file      string // the dump's name, as its process named it on the host
		container bool   // the dump is the watcher's copy, named by the pid in the container
	}{
		{"on the host", fmt.Sprintf("jit-%d.dump", pid), false},
		{"JavaScriptCore's on the host", fmt.Sprintf("jit-77-%d.dump", pid), false},
		{"in a container", "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			copies := t.TempDir()
			path := filepath.Join(t.TempDir(), tc.file)
			read := path
			if tc.container {
				path = "/tmp/jit-1.dump" // as the process in the container sees it: never opened
				read = filepath.Join(copies, fmt.Sprintf("jit-%d.dump", pid))
			}
			if err := os.WriteFile(read, buf.Bytes(), 0o600); err != nil {
				t.Fatal(err)
			}
			var logs []string
			var c counters
			y := &symbolizer{o: Options{Log: func(s string) { logs = append(logs, s) }}, c: &c, dumps: newDumpWatch(copies, false),
				jit: &jitwatch.Watcher{}, dir: copies, stopping: make(chan struct{})}
			ends := []uint64{now + 1, now + 2, now - 1, now + 3, now + 4} // the dump's record is after the third's end
			for i, end := range ends {
				win := &window{seq: int64(i + 1), end: time.Now().Add(-time.Second), endMono: end, waits: []dumpWait{{pid: pid, path: path}}}
				y.await(win)
				y.dumps.forget(win.seq - 1)
			}
			early := len(ends) - 1
			if got := c.snapshot().Early; got != int64(early) {
				t.Errorf("status counts %d early windows, want %d", got, early)
			}
			if len(logs) != early {
				t.Fatalf("%d lines logged for %d early windows: %q", len(logs), early, logs)
			}
			for i, seq := range []int{1, 2, 4, 5} {
				l := logs[i]
				if !strings.HasPrefix(l, fmt.Sprintf("window %d symbolized before %s caught up", seq, path)) {
					t.Errorf("line %d does not name window %d and %s: %q", i, seq, path, l)
				}
				if explains := strings.Contains(l, "counts such windows as early"); explains != (i == 0) {
					t.Errorf("line %d explains: %v, want %v: %q", i, explains, i == 0, l)
				}
			}
		})
	}
}
