package hotspot

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/jitprof/jitprof/internal/foreign"
	"golang.org/x/sys/unix"
)

// call sends a command to the attach listener whose socket sock (an O_PATH
// descriptor) is, connecting as who, and returns its reply. ctx bounds the
// whole exchange: a listener that never answers costs its deadline.
//
// The connection goes through /proc/self/fd/SOCK, the socket's inode
// itself, never its path: a path through /proc/PID/root/tmp would be
// resolved again, and a symlink put there since leads out of the JVM's
// root.
func call(ctx context.Context, who foreign.Cred, sock int, command string, args ...string) (reply, error) {
	req, err := request(command, args...)
	if err != nil {
		return reply{}, err
	}
	conn, err := connect(ctx, who, sock)
	if err != nil {
		return reply{}, err
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Now()) })
	defer stop()
	if _, err := conn.Write(req); err != nil {
		return reply{}, bounded(ctx, fmt.Errorf("sending %s: %w", command, err))
	}
	r, err := readReply(conn)
	return r, bounded(ctx, err)
}

// bounded says that err is the context's, when the context ended.
func bounded(ctx context.Context, err error) error {
	if err != nil && ctx.Err() != nil {
		return fmt.Errorf("%w (%w)", ctx.Err(), err)
	}
	return err
}

// connect connects a non-blocking socket to sock as who. A listener's
// full backlog makes a non-blocking connect fail with EAGAIN: it is tried
// again until ctx ends.
func connect(ctx context.Context, who foreign.Cred, sock int) (*os.File, error) {
	addr := &unix.SockaddrUnix{Name: fmt.Sprintf("/proc/self/fd/%d", sock)}
	fd := -1
	err := asUser(who, func() error {
		var err error
		if fd, err = unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0); err != nil {
			return err
		}
		for {
			err = unix.Connect(fd, addr)
			if !errors.Is(err, unix.EAGAIN) {
				return err
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("%w (its backlog stayed full)", ctx.Err())
			case <-time.After(10 * time.Millisecond):
			}
		}
	})
	if err != nil {
		if fd >= 0 {
			unix.Close(fd)
		}
		return nil, fmt.Errorf("connecting to the JVM's attach socket: %w", err)
	}
	// Non-blocking, the descriptor goes to Go's poller, so deadlines work.
	return os.NewFile(uintptr(fd), "attach socket"), nil
}
