// Package agents hands out jitprof's agents, the shared libraries that make
// runtimes write jitdump: the JVMTI agent for Java and the collector of
// Intel's JIT Profiling API (PHP's opcache, LLVM, wasmtime, ...).
//
// The libraries are C (agents/jvmti, agents/ittjit, sharing the writer in
// agents/jitdump), built by `make agents`; they run inside foreign
// processes, so they hold no Go runtime. `make build` embeds them in the
// jitprof binary (build tag embedagents); Library then extracts them on
// demand. A jitprof built with plain `go build` finds them on disk instead.
//
// A library's path is handed to a runtime that loads it later, often as
// root: whoever can replace the file, or any directory on its path, between
// jitprof's check and that load runs their code in the runtime. So every
// path Library hands out lies in a directory that only root or jitprof's
// own user can change, all the way up from /, reached without a symlink,
// and the file itself is writable by no one else (see trustedDir).
package agents

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"golang.org/x/sys/unix"
)

// Kind names an agent.
type Kind int

const (
	// JVMTI is the agent for Java: java -agentpath:LIB[=dir=DIR,verbose].
	JVMTI Kind = iota
	// IttJIT collects Intel JIT Profiling API events: INTEL_JIT_PROFILER64=LIB.
	IttJIT
)

var fileNames = [...]string{JVMTI: "libjitprof-jvmti.so", IttJIT: "libjitprof-ittjit.so"}

func (k Kind) String() string {
	switch k {
	case JVMTI:
		return "jvmti"
	case IttJIT:
		return "ittjit"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// FileName is the library's file name, as `make agents` builds it.
func (k Kind) FileName() string {
	if k < 0 || int(k) >= len(fileNames) {
		return ""
	}
	return fileNames[k]
}

// Library returns the path of a usable copy of the agent: the one embedded
// in this binary, extracted into a directory of jitprof's own
// (extractDirs); in a binary without them, one found next to the
// executable, in ../lib/jitprof relative to it, or in the build/ directory
// of the source tree. Either way the path is one no other user can make
// hold other code (trustedDir).
func Library(k Kind) (string, error) {
	name := k.FileName()
	if name == "" {
		return "", fmt.Errorf("agents: unknown agent %v", k)
	}
	// A binary with its agents embedded does not look for others on disk
	// when it cannot extract them: those may be another version, and the
	// user is better told why the extraction was refused.
	if data := embedded(name); data != nil {
		euid := os.Geteuid()
		return extract(name, data, extractDirs(euid == 0), extractDirMode(euid))
	}
	return find(name, searchDirs())
}

// rootExtractDirs are where root extracts the embedded agents, best first.
// Root never takes the place from its environment: under `sudo -E`, or
// with a shared home, HOME and XDG_CACHE_HOME name another user's
// directories. /run is root's own tmpfs on systemd machines, emptied at
// boot, so the copies of old versions do not pile up; /var/cache, root's
// too, is for machines without /run, or with /run mounted noexec.
var rootExtractDirs = []string{"/run/jitprof", "/var/cache/jitprof"}

// extractDirs lists where the embedded agents may be extracted, best first.
// Each is still checked (trustedDir) before it is used: an environment
// variable can point anywhere.
func extractDirs(root bool) []string {
	if root {
		return rootExtractDirs
	}
	var dirs []string
	// The runtime directory is the user's own (0700, made by the login
	// manager) and emptied at logout.
	if dir := os.Getenv("XDG_RUNTIME_DIR"); filepath.IsAbs(dir) {
		dirs = append(dirs, filepath.Join(dir, "jitprof"))
	}
	if dir, err := os.UserCacheDir(); err == nil && filepath.IsAbs(dir) {
		dirs = append(dirs, filepath.Join(dir, "jitprof"))
	}
	return dirs
}

// extractDirMode is the mode of the directory the agents are extracted
// into. jitprof record runs its command as jitprof's own user, so a user's
// JVM runs as that user and theirs is private (0700). Root's is 0755: the
// command root records may itself run its JVM as another user (sudo -u, a
// service dropping privileges), which must be able to load the library,
// and readable is safe where only root can write (the files are 0444 and
// root's, the directories root's and 0755 up to /).
func extractDirMode(euid int) uint32 {
	if euid == 0 {
		return 0o755
	}
	return 0o700
}

// libraryMode is an extracted library's mode: nobody writes it in place,
// not even its owner (a new version gets a new name), and anyone who may
// enter the directory may load it.
const libraryMode = 0o444

// searchDirs lists where an unembedded agent may be, most specific first:
// $JITPROF_AGENT_DIR, for packagers and tests, comes first.
func searchDirs() []string {
	var dirs []string
	if dir := os.Getenv("JITPROF_AGENT_DIR"); dir != "" {
		dirs = append(dirs, dir)
	}
	if exe, err := os.Executable(); err == nil {
		if real, err := filepath.EvalSymlinks(exe); err == nil {
			exe = real
		}
		dir := filepath.Dir(exe)
		dirs = append(dirs, dir, filepath.Join(dir, "..", "lib", "jitprof"), filepath.Join(dir, "build"))
	}
	// The source tree this package was compiled from, for go run and go
	// test; with -trimpath the path is not absolute and is skipped.
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		dirs = append(dirs, filepath.Join(filepath.Dir(file), "..", "build"))
	}
	return dirs
}

// find returns the first dirs/name that is a regular file, symlinks
// resolved, if that file is safe to hand out (trustedDir, trustedFile).
// An unsafe one is refused rather than passed over: the next directory's
// copy would not be the library the user put first.
func find(name string, dirs []string) (string, error) {
	for _, dir := range dirs {
		path := filepath.Join(dir, name)
		if st, err := os.Stat(path); err != nil || !st.Mode().IsRegular() {
			continue
		}
		real, err := filepath.EvalSymlinks(path)
		if err == nil {
			real, err = filepath.Abs(real)
		}
		if err == nil {
			err = checkFound(real)
		}
		if err != nil {
			return "", fmt.Errorf("agents: refusing %s: %w", path, err)
		}
		return real, nil
	}
	return "", fmt.Errorf("agents: %s not found in %s; build it with `make agents` in jitprof's source tree, or build jitprof with `make build`, which embeds it",
		name, strings.Join(dirs, ", "))
}

// checkFound checks a library found on disk, path free of symlinks.
func checkFound(path string) error {
	dirfd, err := trustedDir(filepath.Dir(path), 0)
	if err != nil {
		return err
	}
	defer unix.Close(dirfd)
	f, err := openIn(dirfd, filepath.Dir(path), filepath.Base(path))
	if err != nil {
		return err
	}
	return f.Close()
}

// extract puts data into the first of dirs that is safe (trustedDir, made
// with mode dirMode if missing) under a name holding its hash, unless a
// file with that content is already there, and returns its path. The hash
// in the name keeps binaries of different versions from sharing a copy;
// the content is compared too, so a damaged copy is replaced. With no safe
// directory it fails, saying why each was refused.
func extract(name string, data []byte, dirs []string, dirMode uint32) (string, error) {
	var refused []string
	for _, dir := range dirs {
		path, err := extractInto(name, data, dir, dirMode)
		if err == nil {
			return path, nil
		}
		refused = append(refused, fmt.Sprintf("not into %s: %v", dir, err))
	}
	if len(refused) == 0 {
		return "", fmt.Errorf("agents: nowhere to extract the embedded %s (no XDG_RUNTIME_DIR, XDG_CACHE_HOME or HOME)", name)
	}
	return "", fmt.Errorf("agents: extracting the embedded %s: %s", name, strings.Join(refused, "; "))
}

func extractInto(name string, data []byte, dir string, dirMode uint32) (string, error) {
	dirfd, err := trustedDir(dir, dirMode)
	if err != nil {
		return "", err
	}
	defer unix.Close(dirfd)
	dir = filepath.Clean(dir)
	var fsStat unix.Statfs_t
	if err := unix.Fstatfs(dirfd, &fsStat); err == nil && fsStat.Flags&unix.ST_NOEXEC != 0 {
		return "", fmt.Errorf("%s is on a file system mounted noexec, where no library can be loaded", dir)
	}
	base := extractedName(name, data)
	path := filepath.Join(dir, base)
	if holds(dirfd, dir, base, data) == nil {
		return path, nil
	}
	if err := writeIn(dirfd, dir, base, data); err != nil {
		return "", err
	}
	if err := holds(dirfd, dir, base, data); err != nil {
		return "", fmt.Errorf("after writing it: %w", err)
	}
	return path, nil
}

// extractedName is the name data, the library name, is extracted under.
func extractedName(name string, data []byte) string {
	sum := sha256.Sum256(data)
	return strings.TrimSuffix(name, ".so") + "-" + hex.EncodeToString(sum[:8]) + ".so"
}

// writeIn writes data to dir/base (dirfd) whole: into a new temporary file
// (O_EXCL, so never one someone else made), renamed over whatever base was.
func writeIn(dirfd int, dir, base string, data []byte) error {
	random := make([]byte, 8)
	rand.Read(random)
	tmp := "." + base + "." + hex.EncodeToString(random) + ".tmp"
	fd, err := unix.Openat(dirfd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return &fs.PathError{Op: "create", Path: filepath.Join(dir, tmp), Err: err}
	}
	f := os.NewFile(uintptr(fd), filepath.Join(dir, tmp))
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(libraryMode)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		if err = unix.Renameat(dirfd, tmp, dirfd, base); err != nil {
			err = &fs.PathError{Op: "rename", Path: filepath.Join(dir, base), Err: err}
		}
	}
	if err != nil {
		unix.Unlinkat(dirfd, tmp, 0)
	}
	return err
}

// holds tells whether dir/base (dirfd) is a safe file (trustedFile) holding
// data: nil if so, else why not.
func holds(dirfd int, dir, base string, data []byte) error {
	f, err := openIn(dirfd, dir, base)
	if err != nil {
		return err
	}
	defer f.Close()
	have, err := io.ReadAll(io.LimitReader(f, int64(len(data))+1))
	if err != nil {
		return err
	}
	if !bytes.Equal(have, data) {
		return fmt.Errorf("%s does not hold the library", f.Name())
	}
	return nil
}

// openIn opens dir/base (dirfd) for reading, not through a symlink, and
// checks it is a regular file only root or this user can change.
func openIn(dirfd int, dir, base string) (*os.File, error) {
	path := filepath.Join(dir, base)
	fd, err := unix.Openat(dirfd, base, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, &fs.PathError{Op: "stat", Path: path, Err: err}
	}
	if err := trusted(path, &st, unix.S_IFREG, false); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return os.NewFile(uintptr(fd), path), nil
}

// trustedDir opens dir, an absolute path, for reading and returns its
// descriptor, if no one but root and this user can change what the path
// leads to, now or later:
//
//   - it is walked from / one name at a time, each opened relative to the
//     one before with O_NOFOLLOW and checked through its descriptor, so
//     what is checked is what the path leads to, and no symlink is taken
//     (a symlink's target could be anyone's);
//   - every directory on the way is owned by root or this user, and
//     writable by no group and no one else: else its owner, or its
//     writers, could rename a new tree into place under the path. Group
//     writable counts even for root's groups; an ACL granting write shows
//     in the group bits, which hold the ACL's mask;
//   - except that a sticky directory writable by all (/tmp) may lie on the
//     way, since in it only the entry's owner (root or this user, as
//     checked next) may rename or remove the entry the path goes through;
//     dir itself may not be one, as others could make names in it.
//
// With createMode set, missing directories are made with that mode and
// dir's own mode is set to it, if this user owns it; with createMode 0
// nothing is changed.
func trustedDir(dir string, createMode uint32) (int, error) {
	if !filepath.IsAbs(dir) {
		return -1, fmt.Errorf("%s is not an absolute path", dir)
	}
	dir = filepath.Clean(dir)
	fd, err := unix.Open("/", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, &fs.PathError{Op: "open", Path: "/", Err: err}
	}
	at := "/"
	rest := strings.TrimPrefix(dir, "/")
	for {
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			unix.Close(fd)
			return -1, &fs.PathError{Op: "stat", Path: at, Err: err}
		}
		if err := trusted(at, &st, unix.S_IFDIR, rest != ""); err != nil {
			unix.Close(fd)
			return -1, err
		}
		if rest == "" {
			break
		}
		var name string
		name, rest, _ = strings.Cut(rest, "/")
		at = filepath.Join(at, name)
		flags := unix.O_PATH
		if rest == "" {
			flags = unix.O_RDONLY // dir itself is read, and its mode set
		}
		next, err := openDir(fd, name, at, flags, createMode)
		unix.Close(fd)
		if err != nil {
			return -1, err
		}
		fd = next
	}
	if createMode != 0 {
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err == nil && int(st.Uid) == os.Geteuid() && st.Mode&0o7777 != createMode {
			if err := unix.Fchmod(fd, createMode); err != nil {
				unix.Close(fd)
				return -1, &fs.PathError{Op: "chmod", Path: at, Err: err}
			}
		}
	}
	return fd, nil
}

// openDir opens the directory name in parent, not through a symlink,
// making it first with createMode if it is missing and createMode is set.
func openDir(parent int, name, path string, flags int, createMode uint32) (int, error) {
	flags |= unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC
	fd, err := unix.Openat(parent, name, flags, 0)
	if errors.Is(err, unix.ENOENT) && createMode != 0 {
		if err = unix.Mkdirat(parent, name, createMode); err == nil || errors.Is(err, unix.EEXIST) {
			fd, err = unix.Openat(parent, name, flags, 0)
		}
	}
	if err == nil {
		return fd, nil
	}
	var st unix.Stat_t
	if unix.Fstatat(parent, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK {
		return -1, fmt.Errorf("%s is a symlink, which jitprof does not follow here: where it leads, another user may be able to replace the library", path)
	}
	return -1, &fs.PathError{Op: "open", Path: path, Err: err}
}

// trusted checks that what st describes, at path, is of type kind (S_IFDIR,
// S_IFREG), owned by root or this user, and writable by no one else; a
// directory on the way to another (passage) may be sticky and writable by
// all.
func trusted(path string, st *unix.Stat_t, kind uint32, passage bool) error {
	if st.Mode&unix.S_IFMT != kind {
		what := "a directory"
		if kind == unix.S_IFREG {
			what = "a regular file"
		}
		return fmt.Errorf("%s is not %s", path, what)
	}
	if euid := os.Geteuid(); st.Uid != 0 && int(st.Uid) != euid {
		return fmt.Errorf("%s is owned by uid %d, neither root nor jitprof's uid %d: that user could swap the library before the runtime loads it", path, st.Uid, euid)
	}
	if st.Mode&0o022 != 0 && !(passage && st.Mode&unix.S_ISVTX != 0) {
		return fmt.Errorf("%s is writable by group or others (mode %04o): they could swap the library before the runtime loads it", path, st.Mode&0o7777)
	}
	return nil
}
