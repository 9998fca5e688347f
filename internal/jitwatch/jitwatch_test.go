package jitwatch

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/jitprof/jitprof/internal/fixtures"
	"github.com/jitprof/jitprof/internal/foreign"
	"github.com/jitprof/jitprof/internal/jitsources"
	"github.com/jitprof/jitprof/jitdump"
)

// mapScript writes a perf map line for a, waits for a line on its input,
// appends one for b at the same address, waits again and exits, saying
// "ready" each time it wrote. $$ is its pid where it runs: in a container,
// its pid in the container's pid namespace, as a runtime's would be.
const mapScript = `m=/tmp/perf-$$.map; printf '1000 10 a\n' >$m; echo ready; read x; printf '1000 10 b\n' >>$m; echo ready; read y; echo $$`

// TestJITWatcher: the watcher copies a recorded process's perf map, found
// by the pid the process has where it runs (in a container: in its own pid
// namespace and /tmp), under its recorded pid, with the time each line
// appeared as the test measured it; at the process's exit (a container's
// /tmp then goes), the copy is in place.
func TestJITWatcher(t *testing.T) {
	for _, tc := range []struct {
		name string
		argv []string
	}{
		{"this namespace", []string{"sh", "-c", mapScript}},
		{"container", []string{fixtures.LookPath(t, "unshare"), "--pid", "--mount", "--fork", "sh", "-c", "mount -t tmpfs tmpfs /tmp && " + mapScript}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			cmd := exec.Command(tc.argv[0], tc.argv[1:]...)
			stdin, err := cmd.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			cmd.Stderr = os.Stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer cmd.Wait()
			defer stdin.Close()
			out := bufio.NewScanner(stdout)
			wait := func() {
				if !out.Scan() || out.Text() != "ready" {
					stdin.Close()
					cmd.Wait()
					t.Skipf("%v did not run (not root?): %q %v", tc.argv, out.Text(), out.Err())
				}
			}
			wait()
			w := Watch(dir, []int{cmd.Process.Pid}, Options{Note: func(msg string) { t.Log(msg) }})
			defer w.Stop()
			time.Sleep(3 * WatchInterval)
			before := clockNow(unix.CLOCK_MONOTONIC)
			fmt.Fprintln(stdin)
			wait()
			after := clockNow(unix.CLOCK_MONOTONIC)
			stdin.Close()
			if !out.Scan() {
				t.Fatal("no pid from the script")
			}
			t.Cleanup(func() { os.Remove("/tmp/perf-" + out.Text() + ".map") })
			if err := cmd.Wait(); err != nil {
				t.Fatal(err)
			}
			// The recorded pid: the script's, a child of unshare's in a
			// container.
			pid := cmd.Process.Pid
			if tc.name == "container" {
				pid = onlyFile(t, dir, "perf-*.map")
			}
			path := filepath.Join(dir, fmt.Sprintf("perf-%d.map", pid))
			deadline := time.Now().Add(10 * time.Second)
			for !exists(path) && time.Now().Before(deadline) {
				time.Sleep(WatchInterval) // in place once the watcher saw it exit
			}
			files, err := w.Stop()
			if err != nil {
				t.Fatal(err)
			}
			if want := []string{path, path + jitsources.TimesSuffix}; !slices.Equal(files, want) {
				t.Errorf("copied %q, want %q", files, want)
			}
			if got, _ := filepath.Glob(filepath.Join(dir, "*")); len(got) != 2 {
				t.Errorf("%s holds %q: other processes' maps were copied", dir, got)
			}
			m, err := jitsources.ReadPerfMap(foreign.Plain(path), func(err error) { t.Error(err) })
			if err != nil || len(m.Entries) != 2 {
				t.Fatalf("the copy: %+v (%v)", m, err)
			}
			// mtime is the coarse real-time clock: up to a tick behind.
			const tick = 10 * uint64(time.Millisecond)
			t.Logf("a at %d, b at %d; b written in [%d, %d]", m.Times[0], m.Times[1], before, after)
			if m.Entries[0].Name != "a" || m.Times[0] != 0 {
				t.Errorf("a, there when watching began, at %d; want 0", m.Times[0])
			}
			if m.Entries[1].Name != "b" || m.Times[1]+tick < before || m.Times[1] > after {
				t.Errorf("b appeared at %d, want in [%d, %d]", m.Times[1], before, after)
			}
		})
	}
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// onlyFile returns the pid in the name of the one file of dir that matches
// pattern, perf-*.map.
func onlyFile(t *testing.T, dir, pattern string) int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if m, _ := filepath.Glob(filepath.Join(dir, pattern)); len(m) == 1 {
			var pid int
			if _, err := fmt.Sscanf(strings.TrimPrefix(filepath.Base(m[0]), "perf-"), "%d.map", &pid); err != nil {
				t.Fatal(err)
			}
			return pid
		}
		time.Sleep(WatchInterval)
	}
	t.Fatalf("no %s in %s", pattern, dir)
	return 0
}

// BenchmarkWatchLook is one look of a watcher of every process on this
// machine, as record -a makes it, none of them writing: what watching costs
// every WatchInterval.
func BenchmarkWatchLook(b *testing.B) {
	w := newWatcher(b.TempDir(), nil, Options{})
	defer w.close()
	w.look()
	for b.Loop() {
		w.look()
	}
	b.ReportMetric(float64(len(w.procs)), "processes")
}

// A dump copied while its runtime writes ends with a whole record: the
// copy's size is a record boundary at every size the dump had.
func TestWholeRecords(t *testing.T) {
	var buf bytes.Buffer
	w, err := jitdump.NewWriter(&buf, jitdump.Header{Pid: 1, Timestamp: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	bounds := []int64{int64(buf.Len())} // the header's end
	for i, name := range []string{"f", "a longer name", "g"} {
		if _, err := w.Load(&jitdump.Function{Name: name, Addr: 0x1000 * uint64(i+1), Code: bytes.Repeat([]byte{0xc3}, 10*(i+1))}); err != nil {
			t.Fatal(err)
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		bounds = append(bounds, int64(buf.Len()))
	}
	path := filepath.Join(t.TempDir(), "jit-1.dump")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tl := &tail{src: f, dump: true}
	for size := int64(0); size <= int64(buf.Len()); size++ {
		want := int64(0)
		for _, b := range bounds {
			if b <= size {
				want = b
			}
		}
		if got := tl.wholeRecords(size); got != want {
			t.Fatalf("at %d bytes: copy up to %d, want %d (records end at %v)", size, got, want, bounds)
		}
	}
	// Sizes that make no sense: copied as they are.
	zeros := filepath.Join(t.TempDir(), "jit-2.dump")
	if err := os.WriteFile(zeros, make([]byte, 64), 0o644); err != nil {
		t.Fatal(err)
	}
	z, err := os.Open(zeros)
	if err != nil {
		t.Fatal(err)
	}
	defer z.Close()
	bad := &tail{src: z, dump: true}
	if got := bad.wholeRecords(64); got != 64 || bad.dump {
		t.Errorf("a dump of zeros: copy up to %d, dump %v", got, bad.dump)
	}
}

// liveScript writes a perf map line for a and the start of one for b, says
// "ready", waits for a line on its input, ends b's line and exits.
const liveScript = `m=/tmp/perf-$$.map; printf '1000 10 a\n1000 10 b' >$m; echo ready; read x; printf 'b\n' >>$m`

// TestJITWatcherLive: a live watcher's copy is readable while the process
// runs, holding its whole lines only (b's start would name b "b"), each
// timed; at the exit the rest is copied; Drop removes an exited process's
// copies, and past the size bound the oldest exited process's copies go
// first, counted.
func TestJITWatcherLive(t *testing.T) {
	for _, tc := range []struct {
		name     string
		procs    int
		maxBytes int64
		drop     bool
		left     int // processes whose copies remain
		evicted  int64
	}{
		{"kept until dropped", 1, 0, false, 1, 0},
		{"dropped", 1, 0, true, 0, 0},
		{"bounded, oldest first", 2, 60, false, 1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			// The test's own processes only: host-wide, other tests'
			// perf maps would fill the size bound (a run beside the
			// real-runtime packages found this one's copies evicted).
			w := newWatcher(dir, []int{os.Getpid()}, Options{MaxBytes: tc.maxBytes, Note: func(msg string) { t.Log(msg) }})
			w.live = true
			defer w.close()
			var pids []int
			for range tc.procs {
				cmd := exec.Command("sh", "-c", liveScript)
				stdin, err := cmd.StdinPipe()
				if err != nil {
					t.Fatal(err)
				}
				stdout, err := cmd.StdoutPipe()
				if err != nil {
					t.Fatal(err)
				}
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				pid := cmd.Process.Pid
				t.Cleanup(func() { os.Remove(fmt.Sprintf("/tmp/perf-%d.map", pid)) })
				if out := bufio.NewScanner(stdout); !out.Scan() || out.Text() != "ready" {
					t.Fatalf("the script: %q", out.Text())
				}
				w.look()
				path := filepath.Join(dir, fmt.Sprintf("perf-%d.map", pid))
				m, err := jitsources.ReadPerfMap(foreign.Plain(path), func(err error) { t.Error(err) })
				if err != nil || len(m.Entries) != 1 || m.Entries[0].Name != "a" {
					t.Fatalf("the live copy while b's line is unfinished: %+v (%v)", m, err)
				}
				fmt.Fprintln(stdin)
				if err := cmd.Wait(); err != nil {
					t.Fatal(err)
				}
				w.look() // sees it exited
				m, err = jitsources.ReadPerfMap(foreign.Plain(path), func(err error) { t.Error(err) })
				if err != nil || len(m.Entries) != 2 || m.Entries[1].Name != "bb" || m.Times[1] == 0 {
					t.Fatalf("the copy after the exit: %+v (%v)", m, err)
				}
				pids = append(pids, pid)
			}
			if tc.drop {
				w.Drop([]uint32{uint32(pids[0])})
				w.look()
			}
			var left []int
			for _, pid := range pids {
				if exists(filepath.Join(dir, fmt.Sprintf("perf-%d.map", pid))) {
					left = append(left, pid)
				}
			}
			bytes, evicted := w.Usage()
			t.Logf("left %v of %v, %d bytes, %d evicted", left, pids, bytes, evicted)
			if len(left) != tc.left || evicted != tc.evicted {
				t.Errorf("copies of %v left, %d evicted; want %d left, %d evicted", left, evicted, tc.left, tc.evicted)
			}
			if tc.evicted > 0 && (len(left) != 1 || left[0] != pids[len(pids)-1]) {
				t.Errorf("copies of %v left, want the newest's, %d", left, pids[len(pids)-1])
			}
			if tc.maxBytes > 0 && bytes > tc.maxBytes {
				t.Errorf("%d bytes copied, over the bound %d", bytes, tc.maxBytes)
			}
		})
	}
}

// BenchmarkWatchLookLive is BenchmarkWatchLook for the agent's watcher,
// which also removes dropped copies and keeps them within their bound.
func BenchmarkWatchLookLive(b *testing.B) {
	w := newWatcher(b.TempDir(), nil, Options{MaxBytes: 1 << 20})
	w.live = true
	defer w.close()
	w.look()
	for b.Loop() {
		w.look()
	}
	b.ReportMetric(float64(len(w.procs)), "processes")
}
