package record

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/jitprof/jitprof/internal/atomicfile"
	"github.com/jitprof/jitprof/internal/jitsources"
	"github.com/jitprof/jitprof/perfdata"
	"golang.org/x/sys/unix"
)

// Gather moves into dir the files the recorded processes wrote because they
// were recorded: the dumps the recording's markers point to (in the working
// directory, /tmp, or under dir's .debug/jit), each process's perf map in
// /tmp, and the V8 logs node writes with --perf-prof (isolate-*-PID-v8.log
// in workDir). It is for a command jitprof started with its runtime
// environment: those files are its doing, and with them beside it the
// recording at data reads anywhere (the report looks for dumps and maps in
// the recording's directory). A file already in dir stays; one whose name
// dir already has is left where it is, with a note; a perf map the
// recording's JITWatcher copied whole into dir is removed. It returns the
// paths the files have now.
func Gather(data, dir, workDir string, note func(string)) ([]string, error) {
	f, err := perfdata.Open(data)
	if err != nil {
		return nil, err
	}
	pids := make(map[uint32]bool)
	rec, err := jitsources.Scan(f.Reader, func(r perfdata.Record, _ int64) {
		if c, ok := r.(*perfdata.Comm); ok {
			pids[c.Pid] = true
		}
	})
	f.Close()
	if err != nil {
		return nil, err
	}
	var files []string
	for _, m := range rec.Markers {
		pids[m.Pid] = true
		files = append(files, m.Path)
	}
	for pid := range pids {
		files = append(files, filepath.Join("/tmp", fmt.Sprintf("perf-%d.map", pid)))
	}
	logs, err := filepath.Glob(filepath.Join(workDir, "isolate-*-v8.log"))
	if err != nil {
		return nil, err
	}
	for _, l := range logs {
		if m := v8Log.FindStringSubmatch(filepath.Base(l)); m != nil {
			if pid, err := strconv.ParseUint(m[1], 10, 32); err == nil && pids[uint32(pid)] {
				files = append(files, l)
			}
		}
	}

	var moved []string
	taken := make(map[string]bool)
	for _, from := range files {
		to := filepath.Join(dir, filepath.Base(from))
		if same, err := sameFile(from, to); err != nil || same {
			if same {
				moved = append(moved, to)
			}
			continue // not there (a map that was never written), or already in place
		}
		if copied(from, to) {
			// The recording's watcher copied it whole, with its times:
			// the move is done but for the removal.
			if err := os.Remove(from); err != nil {
				return moved, err
			}
			taken[to] = true
			moved = append(moved, to, to+jitsources.TimesSuffix)
			continue
		}
		if _, err := os.Lstat(to); err == nil || taken[to] {
			note(fmt.Sprintf("%s stays where it is: %s has a file of that name", from, dir))
			continue
		}
		if err := move(from, to); err != nil {
			return moved, err
		}
		taken[to] = true
		moved = append(moved, to)
	}
	return moved, nil
}

// copied tells whether to is the copy of the perf map from that
// JITWatcher made: as long, with a times file.
func copied(from, to string) bool {
	fi, err1 := os.Stat(from)
	ti, err2 := os.Stat(to)
	_, err3 := os.Stat(to + jitsources.TimesSuffix)
	return err1 == nil && err2 == nil && err3 == nil && fi.Size() == ti.Size() && strings.HasSuffix(from, ".map")
}

// v8Log is the name of a V8 log: isolate-<address>-<pid>-v8.log.
var v8Log = regexp.MustCompile(`^isolate-0x[0-9a-f]+-([0-9]+)-v8\.log$`)

// sameFile tells whether from, which must exist, is the file at to; an
// error when from does not exist.
func sameFile(from, to string) (bool, error) {
	fi, err := os.Stat(from)
	if err != nil {
		return false, err
	}
	ti, err := os.Stat(to)
	return err == nil && os.SameFile(fi, ti), nil
}

// move renames from to to, or copies it whole and removes it when they are
// on different file systems (/tmp is often one of its own).
func move(from, to string) error {
	err := os.Rename(from, to)
	if !errors.Is(err, unix.EXDEV) {
		return err
	}
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	if err := atomicfile.Write(to, func(w io.Writer) error {
		_, err := io.Copy(w, in)
		return err
	}); err != nil {
		return err
	}
	return os.Remove(from)
}
