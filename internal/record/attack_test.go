package record

import (
	"bytes"
	"fmt"
	"github.com/jitprof/jitprof/internal/jitwatch"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/jitprof/jitprof/internal/fixtures"
	"github.com/jitprof/jitprof/internal/procfs"
)

// fakePid is the process of a synthetic /proc: a container's, pid 1 in
// its own namespace, owned by the attacker.
const fakePid = 4242

// fakeProc makes a /proc holding one process, fakePid, whose root is root
// and whose owner is the attacker, in a mount namespace of its own; it maps
// the dump at marker (a path it sees) when marker is set. It returns the
// /proc.
func fakeProc(t *testing.T, a fixtures.Attacker, root, marker string) procfs.FS {
	t.Helper()
	proc := t.TempDir()
	dir := filepath.Join(proc, fmt.Sprint(fakePid))
	if err := os.MkdirAll(filepath.Join(dir, "ns"), 0o755); err != nil {
		t.Fatal(err)
	}
	status := fmt.Sprintf("Name:\tnode\nPPid:\t1\nUid:\t%d\t%d\t%d\t%d\nGid:\t%d\t%d\t%d\t%d\nGroups:\t\nNSpid:\t%d\t1\n",
		a.Uid, a.Uid, a.Uid, a.Uid, a.Gid, a.Gid, a.Gid, a.Gid, fakePid)
	// Started at boot: before any look of the watcher's.
	stat := fmt.Sprintf("%d (node) S%s 0 0\n", fakePid, strings.Repeat(" 0", 18))
	maps := ""
	if marker != "" {
		maps = fmt.Sprintf("7f0000000000-7f0000001000 r-xp 00000000 00:2a 12 %s\n", marker)
	}
	for name, text := range map[string]string{"status": status, "stat": stat, "maps": maps} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o444); err != nil {
			t.Fatal(err)
		}
	}
	for link, to := range map[string]string{"root": root, "ns/mnt": "mnt:[4026599999]"} {
		if err := os.Symlink(to, filepath.Join(dir, link)); err != nil {
			t.Fatal(err)
		}
	}
	return procfs.FS(proc)
}

// attackerFile is a file the attacker makes, with what make does to it
// at path (the attacker's, in the attacker's root).
type attackerFile func(t *testing.T, path string, canary fixtures.Canary)

var (
	symlinkTo = func(t *testing.T, path string, c fixtures.Canary) {
		if err := os.Symlink(c.Path, path); err != nil {
			t.Fatal(err)
		}
	}
	// symlinkInRoot links to the canary's path, where the process's root
	// has a root-only file too: the link resolves inside the root, and the
	// file there is opened as the process's owner.
	symlinkInRoot = func(t *testing.T, path string, c fixtures.Canary) {
		symlinkTo(t, path, c)
		inRoot := filepath.Join(filepath.Dir(filepath.Dir(path)), c.Path)
		b, err := os.ReadFile(c.Path)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(inRoot), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(inRoot, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	fifo = func(t *testing.T, path string, _ fixtures.Canary) {
		if err := unix.Mkfifo(path, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	sparse = func(t *testing.T, path string, _ fixtures.Canary) {
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		// Lines, then a terabyte of nothing: zeros that cost no disk.
		f.WriteString("1000 10 a\n")
		if err := f.Truncate(1 << 40); err != nil {
			t.Fatal(err)
		}
	}
)

// TestJITWatcherAttacks: a process's perf map or dump made into a trap by
// the process's owner (here a container's, through a synthetic /proc) is
// neither followed to a root-only file, nor blocks the watcher, nor fills
// the disk: the root-only canary reaches neither the copies nor the notes,
// the look ends, and nothing but what a real perf map would give is
// copied.
func TestJITWatcherAttacks(t *testing.T) {
	a := fixtures.NewAttacker(t)
	canary := fixtures.NewCanary(t)
	for _, tc := range []struct {
		name   string
		file   string // in the attacker's /tmp
		marker bool   // a dump the process maps, not its perf map
		make   attackerFile
		refuse string // in the notes
	}{
		{"perf map a symlink to a root-only file", "perf-1.map", false, symlinkTo, "too many levels of symbolic links"},
		{"dump a symlink to a root-only file", "jit-1.dump", true, symlinkInRoot, "permission denied"},
		{"perf map a FIFO", "perf-1.map", false, fifo, "not a regular file"},
		{"dump a FIFO", "jit-1.dump", true, fifo, "not a regular file"},
		{"perf map sparse", "perf-1.map", false, sparse, "sparse"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := a.Dir(t)
			tmp := filepath.Join(root, "tmp")
			if err := os.Mkdir(tmp, 0o1777); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(tmp, tc.file)
			tc.make(t, path, canary)
			a.Chown(t, path)
			marker := ""
			if tc.marker {
				marker = "/tmp/" + tc.file
			}
			proc := fakeProc(t, a, root, marker)
			dir := t.TempDir()
			var notes notebook
			done := make(chan *jitwatch.Watcher)
			go func() { done <- jitwatch.Watch(dir, nil, jitwatch.Options{Proc: proc, Note: notes.add}) }()
			var w *jitwatch.Watcher
			select {
			case w = <-done:
			case <-time.After(5 * time.Second):
				t.Fatal("the watcher's first look did not end within 5 s")
			}
			files, err := w.Stop()
			t.Logf("copied %q (%v); notes:\n%s", files, err, notes.text())
			canary.Absent(t, notes.bytes(), dir)
			if !strings.Contains(notes.text(), tc.refuse) {
				t.Errorf("no note says %q", tc.refuse)
			}
			if du := diskUse(t, dir); du > 1<<20 {
				t.Errorf("the copies take %d bytes of disk", du)
			}
			if len(files) > 0 {
				t.Errorf("copied %q", files)
			}
		})
	}
}

// TestJITWatcherOwner: perf's rule, a perf map its process's owner (or
// root) does not own is not copied, unless forced; what is copied is mode
// 0600.
func TestJITWatcherOwner(t *testing.T) {
	a := fixtures.NewAttacker(t)
	for _, tc := range []struct {
		name   string
		owner  uint32
		force  bool
		copied bool
	}{
		{"the process's owner's", a.Uid, false, true},
		{"root's", 0, false, true},
		{"another user's", a.Uid + 1, false, false},
		{"another user's, forced", a.Uid + 1, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := a.Dir(t)
			tmp := filepath.Join(root, "tmp")
			if err := os.Mkdir(tmp, 0o1777); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(tmp, "perf-1.map")
			if err := os.WriteFile(path, []byte("1000 10 a\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Chown(path, int(tc.owner), int(tc.owner)); err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			var notes notebook
			w := jitwatch.Watch(dir, nil, jitwatch.Options{Proc: fakeProc(t, a, root, ""), Force: tc.force, Note: notes.add})
			files, err := w.Stop()
			if err != nil {
				t.Fatal(err)
			}
			copy := filepath.Join(dir, fmt.Sprintf("perf-%d.map", fakePid))
			if got := len(files) > 0; got != tc.copied {
				t.Fatalf("copied %q, want a copy: %v; notes:\n%s", files, tc.copied, notes.text())
			}
			if !tc.copied {
				if !strings.Contains(notes.text(), "not owned by") {
					t.Errorf("no note says why; notes:\n%s", notes.text())
				}
				return
			}
			for _, f := range []string{copy, copy + ".times"} {
				fi, err := os.Stat(f)
				if err != nil {
					t.Fatal(err)
				}
				if fi.Mode().Perm() != 0o600 {
					t.Errorf("%s: mode %v, want 0600", f, fi.Mode().Perm())
				}
			}
			if b, _ := os.ReadFile(copy); string(b) != "1000 10 a\n" {
				t.Errorf("the copy holds %q", b)
			}
		})
	}
}

// TestJITWatcherBound: a perf map larger than the bound on the copies is
// cut at the bound, at a line's end, during the copy, and said, naming
// the copy; the recording goes on. A live watcher (the agent's) keeps its
// bound within a look too.
func TestJITWatcherBound(t *testing.T) {
	a := fixtures.NewAttacker(t)
	const bound = 1 << 20
	for _, live := range []bool{false, true} {
		t.Run(fmt.Sprintf("live=%v", live), func(t *testing.T) {
			root := a.Dir(t)
			tmp := filepath.Join(root, "tmp")
			if err := os.Mkdir(tmp, 0o1777); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(tmp, "perf-1.map")
			line := []byte("7f0000001000 10 a_function_of_some_length\n")
			if err := os.WriteFile(path, bytes.Repeat(line, 8*bound/len(line)), 0o644); err != nil {
				t.Fatal(err)
			}
			a.Chown(t, path)
			dir := t.TempDir()
			var notes notebook
			o := jitwatch.Options{Proc: fakeProc(t, a, root, ""), MaxBytes: bound, Note: notes.add}
			var w *jitwatch.Watcher
			if live {
				w = jitwatch.WatchLive(dir, nil, o)
			} else {
				w = jitwatch.Watch(dir, nil, o)
			}
			if live {
				// Within the first look already.
				if du := diskUse(t, dir); du > bound+64<<10 {
					t.Errorf("after one look, the copies take %d bytes, over the bound %d", du, bound)
				}
			}
			if _, err := w.Stop(); err != nil {
				t.Fatal(err)
			}
			t.Logf("notes:\n%s", notes.text())
			copy := filepath.Join(dir, fmt.Sprintf("perf-%d.map", fakePid))
			b, err := os.ReadFile(copy)
			if err != nil {
				t.Fatal(err)
			}
			times, _ := os.ReadFile(copy + ".times")
			if n := len(b) + len(times); n > bound || len(b) < bound/2 {
				t.Errorf("copied %d bytes with the times, want up to the bound %d", n, bound)
			}
			if len(b)%len(line) != 0 {
				t.Errorf("the copy, %d bytes, ends inside a line", len(b))
			}
			if !live && !strings.Contains(notes.text(), copy+": cut at") {
				t.Errorf("no note names the cut copy")
			}
			if live && !strings.Contains(notes.text(), "reached") {
				t.Errorf("no note says the copies reached their bound")
			}
		})
	}
}

// notebook collects a watcher's notes.
type notebook struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (n *notebook) add(msg string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.buf.WriteString(msg + "\n")
}

func (n *notebook) bytes() []byte {
	n.mu.Lock()
	defer n.mu.Unlock()
	return bytes.Clone(n.buf.Bytes())
}

func (n *notebook) text() string { return string(n.bytes()) }

// diskUse is the disk the files under dir take.
func diskUse(t *testing.T, dir string) int64 {
	t.Helper()
	var total int64
	filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		var st unix.Stat_t
		if err == nil && unix.Lstat(path, &st) == nil {
			total += st.Blocks * 512
		}
		return nil
	})
	return total
}

// container starts, as the attacker, a container of its own (user, mount
// and pid namespaces) whose /tmp is a tmpfs where plant (a shell command)
// makes /tmp/perf-1.map, the perf map of its pid 1; it returns once that
// is done, with the container's host pid, ended with the test.
func container(t *testing.T, a fixtures.Attacker, plant string) int {
	t.Helper()
	unshare := fixtures.LookPath(t, "unshare")
	cmd := a.Command(unshare, "-Urm", "--pid", "--fork", "--kill-child", "--mount-proc", "sh", "-c",
		"mount -t tmpfs tmpfs /tmp && "+plant+" && echo ready && exec sleep 60")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	b := make([]byte, 6)
	if n, _ := out.Read(b); string(b[:n]) != "ready\n" {
		fixtures.Missing(t, "the attacker's container did not start (user namespaces refused?): %q", b[:n])
	}
	return cmd.Process.Pid
}

// plants are the traps a container's owner sets at its perf map's name.
func plants(c fixtures.Canary) []struct{ name, plant, refuse string } {
	return []struct{ name, plant, refuse string }{
		{"symlink", "ln -s " + c.Path + " /tmp/perf-1.map", "too many levels of symbolic links"},
		{"FIFO", "mkfifo /tmp/perf-1.map", "not a regular file"},
		{"sparse", "truncate -s 1G /tmp/perf-1.map", "sparse"},
	}
}

// TestRecordAllContainerAttacks: record -a beside a container whose owner
// made its perf map a symlink to a root-only file, a FIFO or a sparse
// gigabyte: the recording ends on time with its perf.data, the canary
// reaches neither the recording's directory nor the notes, the disk holds
// no gigabyte, and the copies made are 0600.
func TestRecordAllContainerAttacks(t *testing.T) {
	fixtures.RealTier(t, "record -a beside an attacker's container")
	a := fixtures.NewAttacker(t)
	canary := fixtures.NewCanary(t)
	for _, tc := range plants(canary) {
		t.Run(tc.name, func(t *testing.T) {
			container(t, a, tc.plant)
			dir := t.TempDir()
			var notes notebook
			const duration = time.Second
			begin := time.Now()
			done := make(chan error, 1)
			go func() {
				_, err := Run(t.Context(), Options{Output: filepath.Join(dir, "perf.data"), Freq: 99, AllCPUs: true,
					Duration: duration, Note: notes.add})
				done <- err
			}()
			select {
			case err := <-done:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(duration + 5*time.Second):
				t.Fatalf("record -a did not end within --duration + 5 s")
			}
			t.Logf("recorded in %v; notes:\n%s", time.Since(begin), notes.text())
			canary.Absent(t, notes.bytes(), dir)
			if !strings.Contains(notes.text(), tc.refuse) {
				t.Errorf("no note says the container's perf map was refused (%q)", tc.refuse)
			}
			if du := diskUse(t, dir); du > 200<<20 {
				t.Errorf("the recording's directory takes %d bytes of disk", du)
			}
			entries, _ := os.ReadDir(dir)
			for _, e := range entries {
				fi, err := e.Info()
				if err != nil {
					t.Fatal(err)
				}
				if e.Name() != "perf.data" && fi.Mode().Perm() != 0o600 {
					t.Errorf("%s: mode %v, want 0600", e.Name(), fi.Mode().Perm())
				}
				if strings.HasSuffix(e.Name(), ".tmp") {
					t.Errorf("%s: a temporary file left", e.Name())
				}
			}
		})
	}
}

// TestSignalsBesideFIFO: jitprof record -a and jitprof agent, beside a
// container whose perf map is a FIFO, end within 2 s of SIGINT or SIGTERM
// (the test allows 5 on a loaded machine) and leave no temporary file.
func TestSignalsBesideFIFO(t *testing.T) {
	fixtures.RealTier(t, "signals to jitprof record and agent")
	a := fixtures.NewAttacker(t)
	container(t, a, "mkfifo /tmp/perf-1.map")
	bin := filepath.Join(t.TempDir(), "jitprof")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/jitprof/jitprof/cmd/jitprof").CombinedOutput(); err != nil {
		t.Fatalf("building jitprof: %v\n%s", err, out)
	}
	for _, tc := range []struct {
		name string
		args func(dir string) []string
		sig  syscall.Signal
	}{
		{"record -a, SIGINT", func(dir string) []string {
			return []string{"record", "-a", "-F", "99", "-o", filepath.Join(dir, "perf.data")}
		}, syscall.SIGINT},
		{"record -a, SIGTERM", func(dir string) []string {
			return []string{"record", "-a", "-F", "99", "-o", filepath.Join(dir, "perf.data")}
		}, syscall.SIGTERM},
		{"agent, SIGINT", func(dir string) []string {
			return []string{"agent", "--window", "1s", "--pprof-dir", filepath.Join(dir, "pprof"), "--keep-windows", filepath.Join(dir, "windows")}
		}, syscall.SIGINT},
		{"agent, SIGTERM", func(dir string) []string {
			return []string{"agent", "--window", "1s", "--pprof-dir", filepath.Join(dir, "pprof"), "--keep-windows", filepath.Join(dir, "windows")}
		}, syscall.SIGTERM},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			cmd := exec.Command(bin, tc.args(dir)...)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			// Long enough to be past the first looks at the FIFO.
			time.Sleep(1500 * time.Millisecond)
			cmd.Process.Signal(tc.sig)
			sent := time.Now()
			select {
			case err := <-exited:
				t.Logf("exited %v after the signal (%v); stderr:\n%s", time.Since(sent), err, stderr.String())
			case <-time.After(5 * time.Second):
				cmd.Process.Kill()
				<-exited
				t.Fatalf("still running 5 s after %v; stderr:\n%s", tc.sig, stderr.String())
			}
			filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
				if err == nil && strings.HasSuffix(path, ".tmp") {
					t.Errorf("%s: a temporary file left", path)
				}
				return nil
			})
		})
	}
}
