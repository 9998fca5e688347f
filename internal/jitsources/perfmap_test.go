package jitsources

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jitprof/jitprof/internal/foreign"
)

// TestPickPerfMap: record's copy of a map is read, with its times, unless
// the runtime's own map holds all of its lines and more (Mono flushes its
// buffered map at exit, after a record -p has stopped looking): then the
// runtime's map, with the copy's times.
func TestPickPerfMap(t *testing.T) {
	const two = "1000 10 f\n2000 10 g\n"
	for _, tc := range []struct {
		name       string
		copy, orig string // "": no such file; empty: an empty file
		wantMap    string // "copy" or "orig"
	}{
		{"the copy alone", two, "", "copy"},
		{"the runtime's map alone", "", two, "orig"},
		{"neither", "", "", ""},
		{"an empty copy, the map written since", empty, two, "orig"},
		{"the map grew past the copy", "1000 10 f\n", two, "orig"},
		{"the same", two, two, "copy"},
		{"the map is another", "1000 10 h\n", two, "copy"},
		{"the copy is longer", two + "3000 10 k\n", two, "copy"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sub := t.TempDir()
			var paths []foreign.Path
			copyPath := foreign.Plain(filepath.Join(sub, "copy", "perf-7.map"))
			origPath := foreign.Plain(filepath.Join(sub, "orig", "perf-7.map"))
			for _, f := range []struct {
				p    foreign.Path
				text string
			}{{copyPath, tc.copy}, {origPath, tc.orig}} {
				os.MkdirAll(filepath.Dir(f.p.Name), 0o755)
				if f.text != "" {
					os.WriteFile(f.p.Name, []byte(strings.TrimPrefix(f.text, empty)), 0o644)
				}
				paths = append(paths, f.p)
			}
			os.WriteFile(copyPath.Name+TimesSuffix, []byte("1 100\n"), 0o644)
			m, times, ok, refused := PickPerfMap(paths)
			if len(refused) > 0 {
				t.Fatalf("refused: %v", refused)
			}
			got := ""
			switch {
			case !ok:
			case m.Name == copyPath.Name:
				got = "copy"
			case m.Name == origPath.Name:
				got = "orig"
			}
			if got != tc.wantMap {
				t.Fatalf("picked %q (%s), want %q", got, m, tc.wantMap)
			}
			if ok && tc.copy != "" && times.Name != copyPath.Name+TimesSuffix {
				t.Errorf("times from %s, want the copy's", times)
			}
		})
	}
}

// empty stands for an empty file in TestPickPerfMap's table.
const empty = "\x00"
