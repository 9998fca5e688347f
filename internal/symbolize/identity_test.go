package symbolize

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/jitprof/jitprof/internal/elfsym"
	"github.com/jitprof/jitprof/jitdump"
	"github.com/jitprof/jitprof/jitelf"
	"github.com/jitprof/jitprof/perfdata"
)

// TestFileIdentity: the file at a recorded path is used only if it is the
// one the recording saw mapped there: the same build-id where one was
// recorded, else the device and inode of the MMAP2 records. A process in
// a mount namespace of its own can map a file of its own at a path that
// names root's own on the host; its samples then stay unnamed, with one
// warning naming the file and both identities, and a process that mapped
// the host's file at the same path still gets its names.
func TestFileIdentity(t *testing.T) {
	dir := t.TempDir()
	lib := filepath.Join(dir, "tool")
	f, err := os.Create(lib)
	if err != nil {
		t.Fatal(err)
	}
	const fn = "secret_fn"
	framed := unwindingInfo(t, 64, jitdump.CFAProgram{}.AdvanceLoc(1).DefCFAOffset(16).Offset(6, 2))
	lay, err := jitelf.Write(f, jitelf.OptionsFor(jitdump.Header{}), []jitelf.Function{{Name: fn, Code: make([]byte, 64), CodeAddr: 0x10000, Unwind: framed}})
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	var st unix.Stat_t
	if err := unix.Stat(lib, &st); err != nil {
		t.Fatal(err)
	}
	real := elfsym.FileID{Major: unix.Major(st.Dev), Minor: unix.Minor(st.Dev), Ino: st.Ino}
	other := real
	other.Ino++
	at := func(pid uint32, id elfsym.FileID) *perfdata.Mmap2 {
		m := mmap(pid, 1, 0x400000, 1<<20, lib)
		m.Maj, m.Min, m.Ino = id.Major, id.Minor, id.Ino
		return m
	}
	shown := func(id elfsym.FileID) string { return fmt.Sprintf("%d:%d inode %d", id.Major, id.Minor, id.Ino) }
	cases := []struct {
		name     string
		records  []perfdata.Record
		named    map[uint32]bool // by pid
		warnings []string        // each held by one warning
	}{
		{"the file recorded", []perfdata.Record{at(p1, real)}, map[uint32]bool{p1: true}, nil},
		{"another file at the path", []perfdata.Record{at(p1, other)}, map[uint32]bool{p1: false},
			[]string{lib + ": device " + shown(real) + ", the recording saw device " + shown(other)}},
		{"another inode of the recorded build-id", []perfdata.Record{withBuildID(lay.BuildID[:], at(p1, other))}, map[uint32]bool{p1: true}, nil},
		{"no identity recorded (perf inject's)", []perfdata.Record{at(p1, elfsym.FileID{})}, map[uint32]bool{p1: true}, nil},
		{"one path, two processes, two files", []perfdata.Record{at(p1, real), at(p2, other)}, map[uint32]bool{p1: true, p2: false},
			[]string{lib + ": device " + shown(real) + ", the recording saw device " + shown(other)}},
	}
	for _, c := range cases {
		for _, cache := range []*TableCache{nil, NewTableCache()} {
			t.Run(fmt.Sprintf("%s, cached %v", c.name, cache != nil), func(t *testing.T) {
				rec := filepath.Join(t.TempDir(), "perf.data")
				writeRecording(t, rec, buildCase{records: c.records}, func(s string) string { return s })
				var warnings []string
				sp := buildFrom(t, rec, Options{Tables: cache, Warn: func(err error) { warnings = append(warnings, err.Error()) }})
				addr := 0x400000 + lay.Offsets[0] + 8
				for pid, want := range c.named {
					for range 2 { // looked up again: warned once
						fr := sp.Lookup(pid, addr, 2, false)
						if got := fr.Symbol.Name == fn; got != want {
							t.Errorf("pid %d: named %q, want named: %v", pid, fr.Symbol.Name, want)
						}
						if _, ok := sp.UnwindRule(fr); ok != want {
							t.Errorf("pid %d: call frame information used: %v, want %v", pid, ok, want)
						}
					}
				}
				sp.Close()
				if len(warnings) != len(c.warnings) {
					t.Fatalf("warnings %q, want %d", warnings, len(c.warnings))
				}
				for i, w := range c.warnings {
					if !strings.Contains(warnings[i], w) {
						t.Errorf("warning %q, want it to hold %q", warnings[i], w)
					}
				}
			})
		}
	}
}
