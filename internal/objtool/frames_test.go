package objtool

import (
	"errors"
	"github.com/jitprof/jitprof/internal/contract"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/google/pprof/driver"
	"github.com/google/pprof/profile"
	"github.com/jitprof/jitprof/jitdump"
)

// TestFrames: the functions at an address of jitted code, innermost first,
// with the lines jitprof's profiles give them: an inlined method a dump's
// inline record places, one jitprof infers from V8's source positions, and
// V8's start line where the dump gives no line of the function's script.
// The web UI's source lines are the same frames.
func TestFrames(t *testing.T) {
	const x = "/p/x.js"
	path := filepath.Join(t.TempDir(), "jit-1.dump")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w, err := jitdump.NewWriter(f, jitdump.Header{})
	if err != nil {
		t.Fatal(err)
	}
	pos := func(addr uint64, line, col uint32, file string) jitdump.DebugEntry {
		return jitdump.DebugEntry{Addr: addr + jitdump.V8LineBias, Line: line, Discrim: col, File: file}
	}
	w.Load(&jitdump.Function{Name: "JS:^inner " + x + ":5:15", Addr: 0x2000, Code: make([]byte, 2),
		Lines: []jitdump.DebugEntry{pos(0x2000, 6, 3, x), pos(0x2001, 8, 1, x)}})
	outer, _ := w.Load(&jitdump.Function{Name: "JS:*outer " + x + ":1:15", Addr: 0x1000, Code: make([]byte, 0x30),
		Lines: []jitdump.DebugEntry{pos(0x1000, 2, 3, x), pos(0x1010, 6, 5, x), pos(0x1020, 3, 1, "/p/other.js")}})
	root, _ := w.Load(&jitdump.Function{Name: "root", Addr: 0x3000, Code: make([]byte, 0x20),
		Lines: []jitdump.DebugEntry{{Addr: 0x3000, Line: 10, File: "root.src"}}})
	w.WriteRecord(&jitdump.InlineInfo{CodeIndex: root, CodeAddr: 0x3010, CodeSize: 0x10, MethodID: 2, ParentID: 1, RootID: 1,
		Name: "mid", File: "mid.src", Lines: []jitdump.InlineLine{{Addr: 0x3010, Line: 20}}})
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	jit := func(start, size, index uint64) *profile.Mapping {
		return &profile.Mapping{File: path, BuildID: contract.JITBuildID, Start: start, Limit: start + size, Offset: index}
	}
	outerOwn := func(line int) Frame { return Frame{Name: "JS:*outer " + x + ":1:15", File: x, Line: line} }
	tests := []struct {
		name string
		m    *profile.Mapping
		addr uint64
		want []Frame
	}{
		{"V8's own line", jit(0x1000, 0x30, outer), 0x1000, []Frame{outerOwn(2)}},
		{"inferred from V8's positions", jit(0x1000, 0x30, outer), 0x1010, []Frame{
			{Name: "JS:*inner " + x + ":5:15", File: x, Line: 6, Inferred: true}, outerOwn(6)}},
		{"a line of another script: the start", jit(0x1000, 0x30, outer), 0x1020, []Frame{
			{Name: "JS:*outer " + x + ":1:15", File: x, Line: 1, AtStart: true}}},
		{"an inline record", jit(0x3000, 0x20, root), 0x3010, []Frame{
			{Name: "mid", File: "mid.src", Line: 20}, {Name: "root", File: "root.src", Line: 10}}},
	}
	for _, form := range forms {
		tool := form.tool(&profile.Profile{Mapping: []*profile.Mapping{jit(0x1000, 0x30, outer)}})
		defer tool.Close()
		for _, tc := range tests {
			t.Run(form.name+"/"+tc.name, func(t *testing.T) {
				fn, ok, err := funcAt(tool, tc.m, tc.addr)
				if !ok || err != nil {
					t.Fatalf("FuncIn(%#x) = %v, %v", tc.addr, ok, err)
				}
				if got := fn.Frames(tc.addr); !reflect.DeepEqual(got, tc.want) {
					t.Errorf("Frames(%#x) = %+v\nwant %+v", tc.addr, got, tc.want)
				}
				obj, err := tool.Open(path, 0, 0, 0, "")
				if err != nil {
					t.Fatal(err)
				}
				var want []driver.Frame
				for _, fr := range tc.want {
					name := fr.Name
					if fr.Inferred {
						name += contract.InferredSuffix
					}
					want = append(want, driver.Frame{Func: name, File: fr.File, Line: fr.Line})
				}
				if got, err := obj.SourceLine(tc.addr); err != nil || !reflect.DeepEqual(got, want) {
					t.Errorf("SourceLine(%#x) = %+v, %v\nwant %+v", tc.addr, got, err, want)
				}
			})
		}
	}
}

// TestNoCode: the kernel's and a perf map's functions have no code to
// show, and say so with ErrNoCode.
func TestNoCode(t *testing.T) {
	path := filepath.Join(t.TempDir(), "perf-3.map")
	if err := os.WriteFile(path, []byte("1000 10 foo\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, form := range forms {
		tool := form.tool(&profile.Profile{})
		defer tool.Close()
		fn, ok, err := funcAt(tool, &profile.Mapping{File: path}, 0x1004)
		if !ok || err != nil {
			t.Fatalf("%s: FuncIn = %v, %v", form.name, ok, err)
		}
		if _, _, err := fn.Code(); !errors.Is(err, ErrNoCode) {
			t.Errorf("%s: Code of a perf map's function: %v, want ErrNoCode", form.name, err)
		}
	}
}
