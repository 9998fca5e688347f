package hotspot

import (
	"errors"
	"fmt"
	"os"
	"runtime"

	"github.com/jitprof/jitprof/internal/foreign"
	"golang.org/x/sys/unix"
)

// asUser runs fn with the effective ids and groups of who, when jitprof is
// root and who is someone else: what fn makes is theirs, in their user
// namespace too, the kernel checks their rights rather than root's, and
// the JVM's attach listener, which asks a peer's effective uid and gid
// (SO_PEERCRED), sees its own user connect. Root is accepted too, but only
// where root maps to uid 0: not from the host into a container with a user
// namespace of its own.
//
// Credentials are per thread in Linux, and the libc wrappers (and Go's
// syscall.Setresuid) change every thread's: fn runs on a thread of its own,
// the ids changed there alone by the raw system calls. The real and saved
// uid stay root's, so the thread can change back; if it could not, it is
// never given back to the Go scheduler and ends with its goroutine.
func asUser(who foreign.Cred, fn func() error) error {
	euid, egid := os.Geteuid(), os.Getegid()
	if euid != 0 || (int(who.Uid) == euid && int(who.Gid) == egid) {
		return fn()
	}
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		restored := false
		defer func() {
			if restored {
				runtime.UnlockOSThread()
			}
		}()
		groups, err := unix.Getgroups()
		if err != nil {
			restored = true
			done <- err
			return
		}
		err = become(who)
		if err == nil {
			err = fn()
		}
		restored = become(foreign.Cred{Uid: uint32(euid), Gid: uint32(egid), Groups: toUint32(groups)}) == nil
		if !restored && err == nil {
			err = errors.New("could not take back root's credentials after acting as the JVM's user")
		}
		done <- err
	}()
	return <-done
}

// become sets this thread's effective uid and gid and its groups to who's;
// the uid goes last on the way to a user, first on the way back to root,
// since only a root euid may change the others.
func become(who foreign.Cred) error {
	setGroups := func() error {
		groups := make([]int, len(who.Groups))
		for i, g := range who.Groups {
			groups[i] = int(g)
		}
		return unix.Setgroups(groups) // a raw system call: this thread only
	}
	setGid := func() error { return setres(unix.SYS_SETRESGID, who.Gid) }
	setUid := func() error { return setres(unix.SYS_SETRESUID, who.Uid) }
	steps := []func() error{setGroups, setGid, setUid}
	if who.Uid == 0 {
		steps = []func() error{setUid, setGid, setGroups}
	}
	for _, step := range steps {
		if err := step(); err != nil {
			return fmt.Errorf("taking uid %d, gid %d: %w", who.Uid, who.Gid, err)
		}
	}
	return nil
}

// setres sets the effective id alone (-1 keeps the real and saved ones).
func setres(call uintptr, id uint32) error {
	keep := ^uintptr(0)
	if _, _, errno := unix.RawSyscall(call, keep, uintptr(id), keep); errno != 0 {
		return errno
	}
	return nil
}

func toUint32(ids []int) []uint32 {
	out := make([]uint32, len(ids))
	for i, id := range ids {
		out[i] = uint32(id)
	}
	return out
}
