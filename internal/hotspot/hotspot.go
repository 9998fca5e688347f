// Package hotspot loads jitprof's JVMTI agent into a running HotSpot JVM
// through the JVM's dynamic attach mechanism, as jcmd's JVMTI.agent_load
// does, with no JDK on jitprof's side. The mechanism, as OpenJDK's
// VirtualMachineImpl (the client) and attachListener (the JVM) have it:
//
//   - the JVM listens on a unix socket, /tmp/.java_pid<pid> in its own
//     mount namespace (<pid> its pid in its own pid namespace), which it
//     opens only when asked: when a SIGQUIT finds a file .attach_pid<pid>
//     in its working directory or /tmp owned by its effective uid or root;
//   - a client connects, the JVM checks the client's effective uid and
//     gid (SO_PEERCRED) are its own or root's, reads "1" (the protocol
//     version), a command and three arguments, each ended by a NUL, runs
//     the command and answers a status line and the command's output;
//   - "load" takes the library, "true" (the path is absolute) and the
//     agent's options; its output is "return code: N", N being what the
//     agent's Agent_OnAttach returned.
//
// A JVM is another user's, or a container's: its /tmp, its working
// directory and anything in them are the tenant's, hostile to a root
// jitprof. So everything of the JVM's is reached inside its root
// (/proc/PID/root, by openat2 with RESOLVE_IN_ROOT, never through a
// symlink out) and made, and connected to, with the JVM user's effective
// ids (asUser): what jitprof does there it does with no more rights than
// the JVM's own user, and what it makes is that user's.
//
// The library is copied into a new directory of the JVM's /tmp (place)
// and its path there handed to the JVM: a path on jitprof's side may not
// exist in a container's mount namespace, or may lie in a directory the
// JVM's user cannot enter. The copy is removed once the JVM has it mapped.
package hotspot

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"time"

	"github.com/jitprof/jitprof/internal/procfs"
	"golang.org/x/sys/unix"
)

// DefaultTimeout bounds each wait when Options.Timeout is 0: for the JVM to
// open its socket, and then to answer the load. Measured here, a running
// JVM is attached in 60 to 150 ms from the signal to the agent's dump
// mapped (the agent replays what was compiled before it), a JVM just
// started in up to 280 ms, waiting for its JVMTI to go live; 1.4 s with
// the machine loaded.
const DefaultTimeout = 5 * time.Second

// Options say what to load and how long to wait.
type Options struct {
	// Library is the agent's path on jitprof's side (agents.Library).
	Library string
	// Args are the agent's options: for jitprof's JVMTI agent
	// dir=DIR, a directory in the JVM's mount namespace that its user may
	// write, and verbose. Empty, it writes where JITDUMPDIR says, else
	// under the JVM user's ~/.debug/jit.
	Args string
	// Timeout bounds each wait (DefaultTimeout if 0).
	Timeout time.Duration
	// Proc is the /proc the JVM is looked at through (procfs.Host if "").
	Proc procfs.FS
}

var (
	// ErrNotHotSpot is a process without HotSpot's libjvm.so mapped (or an
	// OpenJ9 JVM, whose attach mechanism is another).
	ErrNotHotSpot = errors.New("not a HotSpot JVM")
	// ErrAttached is a JVM that already writes a jitdump: jitprof's
	// agent or another maps jit-PID.dump.
	ErrAttached = errors.New("the JVM already writes a jitdump")
	// ErrNotReady is a JVM still starting: it does not catch SIGQUIT yet
	// (the signal would kill it; or it never will, run with -Xrs and
	// without a listener), its JVMTI is not live yet, or its /tmp still
	// holds the socket of a JVM that had its pid before, killed, which
	// HotSpot removes as it starts (pids come back soon: a container's
	// JVM has the same one each run).
	ErrNotReady = errors.New("the JVM is not ready to attach")
	// ErrNoListener is a JVM whose socket did not appear in time: run
	// with -XX:+DisableAttachMechanism, or too busy to answer. Such a JVM
	// took the two SIGQUITs for requests of a thread dump, which it
	// printed on its stdout, as it does for jcmd.
	ErrNoListener = errors.New("the JVM did not open its attach socket (-XX:+DisableAttachMechanism, or not answering)")
)

// Load loads opts.Library into JVM pid and starts it with opts.Args.
func Load(ctx context.Context, pid uint32, opts Options) error {
	if err := load(ctx, pid, opts); err != nil {
		return fmt.Errorf("JVM %d: %w", pid, err)
	}
	return nil
}

func (o Options) timeout() time.Duration {
	if o.Timeout > 0 {
		return o.Timeout
	}
	return DefaultTimeout
}

func (o Options) proc() procfs.FS {
	if o.Proc == "" {
		return procfs.Host
	}
	return o.Proc
}

func load(ctx context.Context, pid uint32, opts Options) error {
	lib, err := os.ReadFile(opts.Library)
	if err != nil {
		return err
	}
	// The pidfd keeps the signal for the process inspected here, not for
	// one that took its pid since.
	pidfd, err := unix.PidfdOpen(int(pid), 0)
	if err != nil {
		return fmt.Errorf("pidfd_open: %w", err)
	}
	defer unix.Close(pidfd)
	proc := opts.proc()
	p, err := proc.Live(pid)
	if err != nil {
		return err
	}
	if err := checkMaps(proc, p); err != nil {
		return err
	}
	// Alive now, the process read of through /proc above is the pidfd's:
	// its pid was not free to be taken.
	if err := unix.PidfdSendSignal(pidfd, 0, nil, 0); err != nil {
		return fmt.Errorf("the process ended: %w", err)
	}
	tmp, err := openAt2(p.Root(), "tmp", unix.O_PATH|unix.O_DIRECTORY)
	if err != nil {
		return err
	}
	defer unix.Close(tmp)
	tmpShown := p.Root() + "/tmp"

	wait, cancel := context.WithTimeout(ctx, opts.timeout())
	defer cancel()
	sock, err := listener(wait, proc, p, pidfd, tmp, tmpShown)
	if err != nil {
		return err
	}
	defer unix.Close(sock)

	path, remove, err := place(p, tmp, tmpShown, lib)
	if err != nil {
		return err
	}
	defer remove()
	answer, cancel := context.WithTimeout(ctx, opts.timeout())
	defer cancel()
	for {
		r, err := call(answer, p.Cred, sock, "load", path, "true", opts.Args)
		if errors.Is(err, unix.ECONNREFUSED) {
			return fmt.Errorf("%w: nothing listens on %s/.java_pid%d, a socket left by a JVM that had its pid (%w)", ErrNotReady, tmpShown, p.NSpid, err)
		}
		if err != nil {
			return err
		}
		err = loadResult(r)
		if le := (*LoadError)(nil); !errors.As(err, &le) || le.Code != jniEDetached {
			if err != nil {
				return err
			}
			break
		}
		select {
		case <-answer.Done():
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("%w: JVMTI was still not live after %v", ErrNotReady, opts.timeout())
		case <-time.After(50 * time.Millisecond):
		}
	}
	// The agent maps its dump before Agent_OnAttach returns, but returns
	// 0 whatever kept it from writing one (said on the JVM's stderr).
	if err := checkMaps(proc, p); !errors.Is(err, ErrAttached) {
		return fmt.Errorf("the agent was loaded but maps no jit-%d.dump, so it writes none: why is on the JVM's stderr", p.NSpid)
	}
	return nil
}

// jniEDetached is what jitprof's agent returns from Agent_OnAttach when
// the JVM, still starting, offers no JVMTI environment yet (GetEnv's
// JNI_EDETACHED before JVMTI's live phase): HotSpot opens its attach
// listener before that.
const jniEDetached = -2

// checkMaps refuses a process that is no HotSpot JVM or that already
// writes a jitdump.
func checkMaps(proc procfs.FS, p procfs.Process) error {
	ms, err := proc.Maps(p.Pid)
	if err != nil {
		return err
	}
	m := scanMaps(ms, p.NSpid)
	if m.jitdump != "" {
		return fmt.Errorf("%w (%s)", ErrAttached, m.jitdump)
	}
	if !m.hotspot {
		return ErrNotHotSpot
	}
	return nil
}

// openAt2 opens name inside root (a /proc/PID/root) as the process would
// resolve it: no symlink or ".." leaves root, and no magic link is taken.
func openAt2(root, name string, flags int) (int, error) {
	rootfd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	defer unix.Close(rootfd)
	fd, err := unix.Openat2(rootfd, name, &unix.OpenHow{
		Flags:   uint64(flags | unix.O_CLOEXEC),
		Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS,
	})
	if err != nil {
		return -1, &fs.PathError{Op: "open", Path: root + "/" + name, Err: err}
	}
	return fd, nil
}

// listener returns an O_PATH descriptor of the JVM's attach socket,
// first asking the JVM to open it if it is not there yet.
func listener(ctx context.Context, proc procfs.FS, p procfs.Process, pidfd, tmp int, tmpShown string) (int, error) {
	name := ".java_pid" + strconv.FormatUint(uint64(p.NSpid), 10)
	sock, err := openSocket(p, tmp, tmpShown, name)
	if !errors.Is(err, unix.ENOENT) {
		return sock, err
	}
	status, err := os.ReadFile(proc.Path(p.Pid, "status"))
	if err != nil {
		return -1, err
	}
	if catches, err := catchesQuit(status); err != nil || !catches {
		if err == nil {
			err = fmt.Errorf("%w: it does not catch SIGQUIT, which would kill it", ErrNotReady)
		}
		return -1, err
	}
	remove, err := trigger(proc, p, tmp, tmpShown)
	if err != nil {
		return -1, err
	}
	defer remove()

	// As jcmd does, the signal is sent again halfway: a JVM may miss the
	// first while it cannot yet start the listener. The socket is looked
	// for often (an openat every 20 ms at most): it appears in tens of
	// milliseconds.
	start := time.Now()
	var again time.Time
	if deadline, ok := ctx.Deadline(); ok {
		again = start.Add(deadline.Sub(start) / 2)
	}
	if err := unix.PidfdSendSignal(pidfd, unix.SIGQUIT, nil, 0); err != nil {
		return -1, fmt.Errorf("SIGQUIT: %w", err)
	}
	for delay := time.Millisecond; ; delay = min(2*delay, 20*time.Millisecond) {
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return -1, fmt.Errorf("%w: no %s/%s after %v", ErrNoListener, tmpShown, name, time.Since(start).Round(time.Millisecond))
			}
			return -1, ctx.Err()
		case <-time.After(delay):
		}
		sock, err := openSocket(p, tmp, tmpShown, name)
		if !errors.Is(err, unix.ENOENT) {
			return sock, err
		}
		if !again.IsZero() && time.Now().After(again) {
			again = time.Time{}
			if err := unix.PidfdSendSignal(pidfd, unix.SIGQUIT, nil, 0); err != nil {
				return -1, fmt.Errorf("SIGQUIT: %w", err)
			}
		}
	}
}

// openSocket opens tmp/name, not through a symlink, if it is a socket of
// the JVM's user: HotSpot makes it so. Anything else was planted.
func openSocket(p procfs.Process, tmp int, tmpShown, name string) (int, error) {
	fd, err := unix.Openat(tmp, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, &fs.PathError{Op: "open", Path: tmpShown + "/" + name, Err: err}
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return -1, &fs.PathError{Op: "stat", Path: tmpShown + "/" + name, Err: err}
	}
	switch {
	case st.Mode&unix.S_IFMT != unix.S_IFSOCK:
		err = fmt.Errorf("%s/%s is not a socket (mode %o): not the JVM's", tmpShown, name, st.Mode)
	case st.Uid != p.Cred.Uid:
		err = fmt.Errorf("%s/%s is owned by uid %d, not by the JVM's uid %d: not the JVM's", tmpShown, name, st.Uid, p.Cred.Uid)
	}
	if err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// catchesQuit tells from a /proc/PID/status whether the process catches
// SIGQUIT (and does not ignore it), as jcmd checks before it sends one.
func catchesQuit(status []byte) (bool, error) {
	const quit = 1 << (unix.SIGQUIT - 1)
	var caught, ignored, seen = false, false, 0
	for line := range bytes.Lines(status) {
		key, value, ok := bytes.Cut(line, []byte{':'})
		if !ok || (string(key) != "SigCgt" && string(key) != "SigIgn") {
			continue
		}
		mask, err := strconv.ParseUint(string(bytes.TrimSpace(value)), 16, 64)
		if err != nil {
			return false, fmt.Errorf("status: %s %q: %w", key, bytes.TrimSpace(value), err)
		}
		if string(key) == "SigCgt" {
			caught = mask&quit != 0
		} else {
			ignored = mask&quit != 0
		}
		seen++
	}
	if seen != 2 {
		return false, errors.New("status: no SigCgt or SigIgn")
	}
	return caught && !ignored, nil
}

// trigger makes the file that tells the JVM's SIGQUIT handler to start the
// attach listener, .attach_pid<pid>, in its /tmp, else (a file of that
// name is there already, someone else's) in its working directory: the two
// places HotSpot looks. It returns what removes it.
func trigger(proc procfs.FS, p procfs.Process, tmp int, tmpShown string) (func(), error) {
	name := ".attach_pid" + strconv.FormatUint(uint64(p.NSpid), 10)
	create := func(dir int) error {
		return asUser(p.Cred, func() error {
			fd, err := unix.Openat(dir, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
			if err == nil {
				unix.Close(fd)
			}
			return err
		})
	}
	tmpErr := create(tmp)
	if tmpErr == nil {
		return func() { unix.Unlinkat(tmp, name, 0) }, nil
	}
	cwdShown := proc.Path(p.Pid, "cwd")
	cwd, err := unix.Open(cwdShown, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err == nil {
		if err = create(cwd); err == nil {
			return func() { unix.Unlinkat(cwd, name, 0); unix.Close(cwd) }, nil
		}
		unix.Close(cwd)
	}
	return nil, fmt.Errorf("creating %s in %s (%v) or in %s (%v): the JVM cannot be asked to attach", name, tmpShown, tmpErr, cwdShown, err)
}
