package hotspot

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jitprof/jitprof/agents"
	"github.com/jitprof/jitprof/internal/fixtures"
	"github.com/jitprof/jitprof/internal/procfs"
	"github.com/jitprof/jitprof/jitdump"
	"golang.org/x/sys/unix"
)

func TestMain(m *testing.M) {
	code := m.Run()
	fixtures.RemoveAgents()
	if workClasses.dir != "" {
		os.RemoveAll(workClasses.dir)
	}
	os.Exit(code)
}

// library is the JVMTI agent as jitprof hands it out: agents.Library,
// finding the one `make agents` built for the tests.
func library(t *testing.T) string {
	fixtures.RealTier(t, "running java")
	t.Setenv("JITPROF_AGENT_DIR", fixtures.Agents(t))
	lib, err := agents.Library(agents.JVMTI)
	if err != nil {
		t.Fatal(err)
	}
	return lib
}

var workClasses struct {
	once     sync.Once
	dir, out string
	err      error
}

// classes compiles the Work workload once, into a directory every user
// may read (the attacker's JVM runs it too), shared by the tests and
// removed by TestMain.
func classes(t *testing.T) string {
	javac := fixtures.LookPath(t, "javac")
	src := fixtures.Workload(t, "Work.java")
	workClasses.once.Do(func() {
		if workClasses.dir, workClasses.err = os.MkdirTemp("", "jitprof-hotspot-classes-"); workClasses.err != nil {
			return
		}
		if workClasses.err = os.Chmod(workClasses.dir, 0o755); workClasses.err != nil {
			return
		}
		out, err := exec.Command(javac, "-d", workClasses.dir, src).CombinedOutput()
		workClasses.out, workClasses.err = string(out), err
	})
	if workClasses.err != nil {
		t.Fatalf("javac: %v\n%s", workClasses.err, workClasses.out)
	}
	return workClasses.dir
}

// jvm is the Work workload running in a JVM.
type jvm struct {
	cmd    *exec.Cmd
	pid    uint32 // on this side
	nspid  uint32 // in its own pid namespace, which names its dump
	stdout bytes.Buffer
	stderr bytes.Buffer
	done   chan error
}

// startWork runs Work for ms milliseconds with the extra JVM flags, its
// classes in cp, printing what it compiles (-XX:+PrintCompilation), by
// the command run makes of java's argv (root's, the attacker's, a
// container's, where the JVM is the command's child: forks), and waits
// until the JVM catches SIGQUIT: before, it cannot be asked to attach.
func startWork(t *testing.T, run func(argv ...string) *exec.Cmd, forks bool, cp string, ms int, flags ...string) *jvm {
	t.Helper()
	java := fixtures.LookPath(t, "java")
	cmd := run(append(append([]string{java, "-XX:+PrintCompilation"}, flags...), "-cp", cp, "Work", fmt.Sprint(ms))...)
	j := &jvm{cmd: cmd, done: make(chan error, 1)}
	cmd.Stdout, cmd.Stderr = &j.stdout, &j.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { j.done <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-j.done
	})
	j.pid = uint32(cmd.Process.Pid)
	for {
		if forks {
			children, _ := os.ReadFile(procfs.Host.Path(j.pid, "task", fmt.Sprint(j.pid), "children"))
			if f := strings.Fields(string(children)); len(f) > 0 {
				child, err := strconv.ParseUint(f[0], 10, 32)
				if err != nil {
					t.Fatal(err)
				}
				j.pid, forks = uint32(child), false
			}
		}
		status, err := os.ReadFile(procfs.Host.Path(j.pid, "status"))
		if err != nil {
			t.Fatalf("the JVM ended before it caught SIGQUIT: %v\n%s", err, j.stderr.String())
		}
		if ok, err := catchesQuit(status); err != nil {
			t.Fatal(err)
		} else if ok && !forks {
			st, err := procfs.ParseStatus(status)
			if err != nil {
				t.Fatal(err)
			}
			j.nspid = st.NSpid
			removeStaleSocket(t, j.nspid)
			return j
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func asRoot(argv ...string) *exec.Cmd { return exec.Command(argv[0], argv[1:]...) }

// wait waits for the JVM to end on its own, as Work does after its time.
func (j *jvm) wait(t *testing.T) {
	t.Helper()
	select {
	case err := <-j.done:
		j.done <- err // for the cleanup
		if err != nil {
			t.Fatalf("the JVM: %v\n%s", err, j.stderr.String())
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("the JVM did not end")
	}
}

var compiled = regexp.MustCompile(`\bWork::(\w+) \(`)

// checkDump checks that the JVM's dump in dir names every method of Work
// that the JVM said it compiled (-XX:+PrintCompilation), fib among them.
func checkDump(t *testing.T, j *jvm, dir string) {
	t.Helper()
	path := filepath.Join(dir, fmt.Sprintf("jit-%d.dump", j.nspid))
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("no dump: %v\n%s", err, j.stderr.String())
	}
	r, err := jitdump.NewBytesReader(data)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	names := map[string]bool{}
	for {
		rec, err := r.Next()
		if err != nil {
			break
		}
		if load, ok := rec.(*jitdump.CodeLoad); ok {
			names[load.Name] = true
		}
	}
	want := map[string]bool{}
	for _, m := range compiled.FindAllStringSubmatch(j.stdout.String(), -1) {
		want[m[1]] = true
	}
	if !want["fib"] {
		t.Fatalf("the JVM did not say it compiled Work::fib; what it printed:\n%s", j.stdout.String())
	}
	for method := range want {
		found := false
		for name := range names {
			if strings.HasPrefix(name, "LWork;"+method+"(") {
				found = true
			}
		}
		if !found {
			t.Errorf("the JVM compiled Work::%s, the dump (%d code loads) does not name it", method, len(names))
		}
	}
}

// mappedLibrary returns the agent's line of the JVM's memory map and the
// owner of the file it maps.
func mappedLibrary(t *testing.T, pid uint32) (string, uint32) {
	t.Helper()
	maps, err := os.ReadFile(procfs.Host.Path(pid, "maps"))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(maps)) {
		if !strings.Contains(line, libraryName) {
			continue
		}
		var st unix.Stat_t
		if err := unix.Stat(procfs.Host.Path(pid, "map_files", strings.Fields(line)[0]), &st); err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(line), st.Uid
	}
	t.Fatalf("the JVM does not map %s:\n%s", libraryName, maps)
	return "", 0
}

// removeStaleSocket removes the attach socket a JVM killed earlier left in
// /tmp for pid, which nothing listens on: pids come back within a run (32,768
// of them), and a load would find that socket first and be refused, as jcmd
// is. The JVMs of these tests run in the host's /tmp.
func removeStaleSocket(t *testing.T, pid uint32) {
	t.Helper()
	path := fmt.Sprintf("/tmp/.java_pid%d", pid)
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if err := unix.Connect(fd, &unix.SockaddrUnix{Name: path}); errors.Is(err, unix.ECONNREFUSED) {
		t.Logf("removing %s, a socket nothing listens on", path)
		os.Remove(path)
	}
}

// TestLoad: a root JVM gets the agent, which writes a dump naming the
// methods the JVM compiled, those before the attach (replayed) and after;
// the copy of the library is gone from the JVM's /tmp once loaded, and a
// second load is refused, the JVM already writing a dump.
func TestLoad(t *testing.T) {
	lib := library(t)
	j := startWork(t, asRoot, false, classes(t), 3000)
	dir := t.TempDir()
	start := time.Now()
	if err := Load(context.Background(), j.pid, Options{Library: lib, Args: "dir=" + dir}); err != nil {
		t.Fatalf("%v\n%s", err, j.stderr.String())
	}
	t.Logf("attached in %v", time.Since(start))
	line, owner := mappedLibrary(t, j.pid)
	if !regexp.MustCompile(` /tmp/jitprof-agent-[0-9a-f]{16}/` + libraryName + ` \(deleted\)$`).MatchString(line) {
		t.Errorf("the JVM maps the agent as %q, not a copy in its /tmp removed since", line)
	}
	if owner != 0 {
		t.Errorf("the copy of the library is uid %d's, not the JVM's (root)", owner)
	}
	err := Load(context.Background(), j.pid, Options{Library: lib, Args: "dir=" + dir})
	if !errors.Is(err, ErrAttached) {
		t.Errorf("a second load: %v, want %v", err, ErrAttached)
	}
	j.wait(t)
	checkDump(t, j, dir)
}

// TestLoadStaleSocket: a socket nothing listens on, where the JVM's would
// be (left by a JVM killed that had its pid, until HotSpot removes it as it
// starts), makes the load say the JVM is not ready, at once, not fail for
// good; once it is gone, the load goes through.
func TestLoadStaleSocket(t *testing.T) {
	lib := library(t)
	j := startWork(t, asRoot, false, classes(t), 3000)
	path := fmt.Sprintf("/tmp/.java_pid%d", j.nspid)
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	os.Remove(path)
	if err := unix.Bind(fd, &unix.SockaddrUnix{Name: path}); err != nil {
		t.Fatal(err)
	}
	unix.Close(fd) // bound, never listening: as a killed JVM leaves it
	dir := t.TempDir()
	start := time.Now()
	err = Load(context.Background(), j.pid, Options{Library: lib, Args: "dir=" + dir})
	if !errors.Is(err, ErrNotReady) || !strings.Contains(err.Error(), path) || time.Since(start) > time.Second {
		t.Fatalf("with a stale socket: %v after %v, want %v at once, naming %s", err, time.Since(start), ErrNotReady, path)
	}
	os.Remove(path)
	if err := Load(context.Background(), j.pid, Options{Library: lib, Args: "dir=" + dir}); err != nil {
		t.Fatalf("once it is gone: %v\n%s", err, j.stderr.String())
	}
	j.wait(t)
	checkDump(t, j, dir)
}

// TestDisabled: a JVM run with -XX:+DisableAttachMechanism is refused
// within the timeout, or at once when cancelled, and the trigger file is
// removed.
func TestDisabled(t *testing.T) {
	lib := library(t)
	j := startWork(t, asRoot, false, classes(t), 60_000, "-XX:+DisableAttachMechanism")
	timeout := time.Second
	start := time.Now()
	err := Load(context.Background(), j.pid, Options{Library: lib, Timeout: timeout})
	took := time.Since(start)
	if !errors.Is(err, ErrNoListener) {
		t.Fatalf("got %v, want %v", err, ErrNoListener)
	}
	t.Logf("%v after %v", err, took)
	if took < timeout || took > 3*timeout {
		t.Errorf("refused after %v, the timeout being %v", took, timeout)
	}
	if _, err := os.Lstat(fmt.Sprintf("/tmp/.attach_pid%d", j.pid)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the trigger file is left behind: %v", err)
	}

	// Cancelled, the wait ends at once, whatever its timeout.
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(timeout/10, cancel)
	start = time.Now()
	err = Load(ctx, j.pid, Options{Library: lib, Timeout: 10 * timeout})
	if took := time.Since(start); !errors.Is(err, context.Canceled) || took > 5*timeout {
		t.Errorf("cancelled after %v: %v after %v, the timeout being %v", timeout/10, err, took, 10*timeout)
	}
}

// TestOtherUser: a JVM of an ordinary user is attached with that user's
// credentials, and what it planted in its /tmp is not followed: a symlink
// where the trigger goes (the trigger goes to its working directory
// instead), and one where the library's directory goes (the load fails,
// nothing written through it). The canary, the symlinks' target, is
// untouched; the copy of the library the JVM maps is the user's.
func TestOtherUser(t *testing.T) {
	lib := library(t)
	attacker := fixtures.NewAttacker(t)
	canary := fixtures.NewCanary(t)
	canaryDir := filepath.Dir(canary.Path)
	home := attacker.Dir(t)
	j := startWork(t, func(argv ...string) *exec.Cmd {
		cmd := attacker.Command(argv[0], argv[1:]...)
		cmd.Dir = home
		return cmd
	}, false, classes(t), 3000)

	trigger := fmt.Sprintf("/tmp/.attach_pid%d", j.pid)
	plant(t, attacker, canary.Path, trigger)
	planted := "jitprof-agent-planted-" + filepath.Base(home)
	plant(t, attacker, canaryDir, "/tmp/"+planted)
	defer func(name func() string) { newDirName = name }(newDirName)
	newDirName = func() string { return planted }

	opts := Options{Library: lib, Args: "dir=" + home}
	err := Load(context.Background(), j.pid, opts)
	if !errors.Is(err, unix.EEXIST) {
		t.Errorf("with the library's directory planted: %v, want EEXIST", err)
	}
	newDirName = func() string { return "jitprof-agent-" + filepath.Base(home) }
	if err := Load(context.Background(), j.pid, opts); err != nil {
		t.Fatalf("%v\n%s", err, j.stderr.String())
	}
	if target, err := os.Readlink(trigger); err != nil || target != canary.Path {
		t.Errorf("the planted trigger was removed or replaced: %q, %v", target, err)
	}
	if _, owner := mappedLibrary(t, j.pid); owner != attacker.Uid {
		t.Errorf("the copy of the library is uid %d's, not the JVM's (%d)", owner, attacker.Uid)
	}
	j.wait(t)
	checkDump(t, j, home)

	if data, err := os.ReadFile(canary.Path); err != nil || !bytes.Contains(data, canary.Secret) || len(data) != len("1000 10 ")+len(canary.Secret)+1 {
		t.Errorf("the canary changed: %q, %v", data, err)
	}
	if entries, err := os.ReadDir(canaryDir); err != nil || len(entries) != 1 {
		t.Errorf("something was written beside the canary: %v, %v", entries, err)
	}
	canary.Absent(t, []byte(fmt.Sprint(err)), home)
}

// plant makes a symlink at link to target, as the attacker, removed when
// the test ends.
func plant(t *testing.T, attacker fixtures.Attacker, target, link string) {
	t.Helper()
	if out, err := attacker.Command("ln", "-s", target, link).CombinedOutput(); err != nil {
		t.Fatalf("planting %s: %v\n%s", link, err, out)
	}
	t.Cleanup(func() { os.Remove(link) })
}

// TestContainer: a JVM in a container of an ordinary user (its own user,
// pid and mount namespaces, its own /tmp; root inside is the user outside)
// is attached: the trigger, the library and the socket are the
// container's, in its /tmp, and root on this side, which the container's
// user namespace does not map, connects as the container's root, its
// user.
func TestContainer(t *testing.T) {
	lib := library(t)
	attacker := fixtures.NewAttacker(t)
	unshare := fixtures.LookPath(t, "unshare")
	dir := attacker.Dir(t)
	class, err := os.ReadFile(filepath.Join(classes(t), "Work.class"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "Work.class"), class, 0o644); err != nil {
		t.Fatal(err)
	}
	// dir, which the container's own /tmp hides, is its /srv: the
	// classes are read, and the dump written, there.
	const script = `mount --bind "$0" /srv && mount -t tmpfs tmpfs /tmp && cd /srv && exec "$@"`
	j := startWork(t, func(argv ...string) *exec.Cmd {
		return attacker.Command(unshare, append([]string{"--user", "--map-root-user", "--pid", "--mount", "--fork", "sh", "-c", script, dir}, argv...)...)
	}, true, "/srv", 3000)
	if j.nspid == j.pid {
		t.Fatalf("the JVM's pid %d is the same in its namespace: no container", j.pid)
	}
	start := time.Now()
	if err := Load(context.Background(), j.pid, Options{Library: lib, Args: "dir=/srv"}); err != nil {
		t.Fatalf("%v\n%s", err, j.stderr.String())
	}
	t.Logf("attached in %v", time.Since(start))
	line, owner := mappedLibrary(t, j.pid)
	if owner != attacker.Uid {
		t.Errorf("the copy of the library is uid %d's, not the container's root (%d)", owner, attacker.Uid)
	}
	copied := strings.TrimSuffix(strings.Fields(line)[5], "/"+libraryName)
	if _, err := os.Lstat(copied); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the library's directory %s is in this side's /tmp, not the container's: %v", copied, err)
	}
	j.wait(t)
	checkDump(t, j, dir)
}
