package hotspot

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jitprof/jitprof/internal/fixtures"
	"github.com/jitprof/jitprof/internal/foreign"
	"github.com/jitprof/jitprof/internal/procfs"
	"golang.org/x/sys/unix"
)

// fakeJVM is an attach listener: it takes one connection, notes the
// peer's credentials and the request (up to its fifth NUL, as HotSpot
// reads), and answers reply, or nothing while hang.
type fakeJVM struct {
	path    string
	peer    chan *unix.Ucred
	request chan []byte
}

func listen(t *testing.T, dir, reply string, hang bool) *fakeJVM {
	t.Helper()
	f := &fakeJVM{path: filepath.Join(dir, ".java_pid1"), peer: make(chan *unix.Ucred, 1), request: make(chan []byte, 1)}
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: f.path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(f.path, 0o666); err != nil { // for the other user's connect
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { close(done); l.Close() })
	go func() {
		c, err := l.AcceptUnix()
		if err != nil {
			return
		}
		defer c.Close()
		raw, _ := c.SyscallConn()
		raw.Control(func(fd uintptr) {
			cred, _ := unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
			f.peer <- cred
		})
		var req []byte
		buf := make([]byte, 4096)
		for bytes.Count(req, []byte{0}) < 2+maxArgs {
			n, err := c.Read(buf)
			req = append(req, buf[:n]...)
			if err != nil {
				break
			}
		}
		f.request <- req
		if hang {
			<-done
			return
		}
		c.Write([]byte(reply))
	}()
	return f
}

// pathFD opens path as listener hands sockets to call: O_PATH.
func pathFD(t *testing.T, path string) int {
	t.Helper()
	fd, err := unix.Open(path, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return fd
}

func self() foreign.Cred {
	return foreign.Cred{Uid: uint32(os.Geteuid()), Gid: uint32(os.Getegid())}
}

// TestCall: the load request reaches the listener whole, through the
// socket's descriptor, and its reply comes back; a listener that does not
// answer, or hangs up, costs no more than the context allows.
func TestCall(t *testing.T) {
	tests := []struct {
		name   string
		reply  string
		hang   bool
		cancel bool   // the context is cancelled rather than timed out
		want   error  // errors.Is
		text   string // the error says
	}{
		{name: "loaded", reply: "0\nreturn code: 0\n"},
		{name: "hangs up", reply: "", text: "without a reply"},
		{name: "silent", hang: true, want: context.DeadlineExceeded},
		{name: "cancelled", hang: true, cancel: true, want: context.Canceled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			jvm := listen(t, t.TempDir(), tt.reply, tt.hang)
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			defer cancel()
			if tt.cancel {
				time.AfterFunc(20*time.Millisecond, cancel)
			}
			reply, err := call(ctx, self(), pathFD(t, jvm.path), "load", "/tmp/d/lib.so", "true", "dir=/x")
			if want := "1\x00load\x00/tmp/d/lib.so\x00true\x00dir=/x\x00"; string(<-jvm.request) != want {
				t.Errorf("the listener read another request than %q", want)
			}
			switch {
			case tt.want != nil || tt.text != "":
				if err == nil || (tt.want != nil && !errors.Is(err, tt.want)) || !strings.Contains(err.Error(), tt.text) {
					t.Errorf("got %v, want %v saying %q", err, tt.want, tt.text)
				}
			case err != nil:
				t.Error(err)
			default:
				if err := loadResult(reply); err != nil {
					t.Error(err)
				}
			}
		})
	}
}

// TestCallAsUser: the listener sees the JVM's user connect, not root, and
// jitprof's threads are all root's again after.
func TestCallAsUser(t *testing.T) {
	attacker := fixtures.NewAttacker(t)
	jvm := listen(t, attacker.Dir(t), "0\nreturn code: 0\n", false)
	who := foreign.Cred{Uid: attacker.Uid, Gid: attacker.Gid}
	if _, err := call(context.Background(), who, pathFD(t, jvm.path), "load", "/l.so", "true", ""); err != nil {
		t.Fatal(err)
	}
	if peer := <-jvm.peer; peer.Uid != attacker.Uid || peer.Gid != attacker.Gid {
		t.Errorf("the listener saw uid %d gid %d connect, want %d %d", peer.Uid, peer.Gid, attacker.Uid, attacker.Gid)
	}
	tasks, err := filepath.Glob("/proc/self/task/*/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, task := range tasks {
		b, err := os.ReadFile(task)
		if err != nil {
			continue // the thread ended
		}
		st, err := procfs.ParseStatus(b)
		if err != nil {
			t.Fatal(err)
		}
		if st.Cred.Uid != 0 || st.Cred.Gid != 0 || !strings.Contains(string(b), "\nUid:\t0\t0\t0\t0\n") {
			t.Errorf("%s is left with another user's ids:\n%s", task, b)
		}
	}
}

// TestOpenSocket: only a socket of the JVM's user, reached without a
// symlink, is taken for its listener.
func TestOpenSocket(t *testing.T) {
	dir := t.TempDir()
	jvm := listen(t, dir, "", false)
	if err := os.Symlink(jvm.path, filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "file"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, file string
		uid        uint32 // the JVM's
		want       string // the error says; "" if taken
	}{
		{"the JVM's socket", ".java_pid1", uint32(os.Geteuid()), ""},
		{"another user's socket", ".java_pid1", uint32(os.Geteuid()) + 1, "owned by uid"},
		{"a symlink to a socket", "link", uint32(os.Geteuid()), "not a socket"},
		{"a file", "file", uint32(os.Geteuid()), "not a socket"},
		{"nothing", "missing", uint32(os.Geteuid()), "no such file"},
	}
	dirfd := pathFD(t, dir)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := procfs.Process{Status: procfs.Status{Cred: foreign.Cred{Uid: tt.uid}}}
			fd, err := openSocket(p, dirfd, dir, tt.file)
			if err == nil {
				unix.Close(fd)
			}
			if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
				t.Errorf("got %v, want %q", err, tt.want)
			}
		})
	}
}
