package objtool

import (
	"github.com/jitprof/jitprof/internal/contract"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unsafe"

	"github.com/google/pprof/profile"
	"github.com/jitprof/jitprof/jitdump"
)

// TestFuncInJIT: a jitted function is found by the code_index its mapping
// gives, at the place the mapping says, whatever else held that address:
// its extent, code and lines are its own.
func TestFuncInJIT(t *testing.T) {
	path := filepath.Join(t.TempDir(), "jit-1.dump")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w, err := jitdump.NewWriter(f, jitdump.Header{})
	if err != nil {
		t.Fatal(err)
	}
	a, _ := w.Load(&jitdump.Function{Name: "a", Addr: 0x1000, Code: []byte{0x90, 0x90, 0xc3},
		Lines: []jitdump.DebugEntry{{Addr: 0x1000, Line: 7, File: "a.src"}, {Addr: 0x1002, Line: 8, File: "a.src"}}})
	w.Move(a, 0x1000, 0x3000, 3)
	b, _ := w.Load(&jitdump.Function{Name: "b", Addr: 0x1000, Code: []byte{0xcc, 0xc3}}) // a's old place
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}

	jit := func(start, size, index uint64) *profile.Mapping {
		return &profile.Mapping{File: path, BuildID: contract.JITBuildID, Start: start, Limit: start + size, Offset: index}
	}
	tests := []struct {
		name       string
		m          *profile.Mapping
		addr       uint64
		want       string // "" for none
		start, end uint64
		code       string
		line       int
	}{
		{"a where it was loaded", jit(0x1000, 3, a), 0x1002, "a", 0x1000, 0x1003, "\x90\x90\xc3", 8},
		{"a where it moved", jit(0x3000, 3, a), 0x3002, "a", 0x3000, 0x3003, "\x90\x90\xc3", 8},
		{"b at a's old place", jit(0x1000, 2, b), 0x1000, "b", 0x1000, 0x1002, "\xcc\xc3", 0},
		{"past the function", jit(0x1000, 2, b), 0x1002, "", 0, 0, "", 0},
		{"a code_index never placed there", jit(0x2000, 3, a), 0x2000, "", 0, 0, "", 0},
		{"an unknown code_index", jit(0x1000, 3, 42), 0x1000, "", 0, 0, "", 0},
	}
	for _, form := range forms {
		tool := form.tool(&profile.Profile{Mapping: []*profile.Mapping{jit(0x1000, 3, a)}})
		defer tool.Close()
		for _, tc := range tests {
			t.Run(form.name+"/"+tc.name, func(t *testing.T) {
				fn, ok, err := funcAt(tool, tc.m, tc.addr)
				if err != nil {
					t.Fatal(err)
				}
				if !ok {
					if tc.want != "" {
						t.Fatalf("nothing at %#x, want %s", tc.addr, tc.want)
					}
					return
				}
				if fn.Name != tc.want || fn.Start != tc.start || fn.End != tc.end || fn.CodeIndex != tc.m.Offset {
					t.Errorf("FuncIn = %s [%#x, %#x) index %d, want %s [%#x, %#x) index %d", fn.Name, fn.Start, fn.End, fn.CodeIndex, tc.want, tc.start, tc.end, tc.m.Offset)
				}
				code, _, err := fn.Code()
				if err != nil || string(code) != tc.code {
					t.Errorf("Code = %x, %v; want %x", code, err, tc.code)
				}
				frames := fn.Frames(tc.addr)
				if len(frames) != 1 || frames[0].Name != tc.want || frames[0].Line != tc.line || frames[0].AtStart {
					t.Errorf("Frames(%#x) = %+v; want %s at line %d", tc.addr, frames, tc.want, tc.line)
				}
			})
		}
	}
}

// TestFuncInPerfMap: a perf map's entry, by the map's own lookup.
func TestFuncInPerfMap(t *testing.T) {
	path := filepath.Join(t.TempDir(), "perf-3.map")
	if err := os.WriteFile(path, []byte("1000 10 foo\n1010 20 bar baz\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	m := &profile.Mapping{File: path}
	for _, form := range forms {
		tool := form.tool(&profile.Profile{})
		defer tool.Close()
		for _, tc := range []struct {
			addr       uint64
			want       string
			start, end uint64
		}{{0x1000, "foo", 0x1000, 0x1010}, {0x102f, "bar baz", 0x1010, 0x1030}, {0x1030, "", 0, 0}} {
			fn, ok, err := funcAt(tool, m, tc.addr)
			if err != nil || ok != (tc.want != "") || fn.Name != tc.want || fn.Start != tc.start || fn.End != tc.end {
				t.Errorf("%s: FuncIn(%#x) = %+v, %v, %v; want %s [%#x, %#x)", form.name, tc.addr, fn, ok, err, tc.want, tc.start, tc.end)
			}
		}
	}
}

// TestFuncInNotJIT: mappings with no file behind them name nothing, and a
// dump that cannot be read is an error naming it.
func TestFuncInNotJIT(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "jit-2.dump")
	for _, form := range forms {
		tool := form.tool(&profile.Profile{Mapping: []*profile.Mapping{{File: missing, BuildID: contract.JITBuildID}}})
		defer tool.Close()
		if _, ok, err := funcAt(tool, nil, 0x1000); ok || err != nil {
			t.Errorf("%s: FuncIn(nil mapping) = %v, %v", form.name, ok, err)
		}
		if _, ok, err := funcAt(tool, &profile.Mapping{File: contract.OffCPUFile}, 0x1000); ok || err != nil {
			t.Errorf("%s: FuncIn(off-CPU mapping) = %v, %v", form.name, ok, err)
		}
		if _, _, err := funcAt(tool, &profile.Mapping{File: missing, BuildID: contract.JITBuildID}, 0x1000); err == nil || !strings.Contains(err.Error(), missing) {
			t.Errorf("%s: a missing dump gave %v, want an error naming it", form.name, err)
		}
		if _, _, err := funcAt(tool, &profile.Mapping{File: filepath.Join(t.TempDir(), "perf-3.map")}, 0x1000); err == nil {
			t.Errorf("%s: a missing perf map gave no error", form.name)
		}
	}
}

// forms are the tool's two constructors, for pprof's profiles (the web
// UI's) and for profiles in columns (contract.FromPProf of the same): tests
// hold both to the same answers.
var forms = []struct {
	name string
	tool func(*profile.Profile) *Tool
}{
	{"pprof", func(p *profile.Profile) *Tool { return New(nil, p) }},
	{"columns", func(p *profile.Profile) *Tool { return ForProfiles(nil, contract.FromPProf(p)) }},
}

// funcAt is t.FuncIn for a pprof mapping, nil for none.
func funcAt(t *Tool, m *profile.Mapping, addr uint64) (Func, bool, error) {
	p := contract.FromPProf(&profile.Profile{Mapping: []*profile.Mapping{m}})
	if m == nil {
		return t.FuncIn(p, nil, addr)
	}
	return t.FuncIn(p, &p.Mappings[0], addr)
}

// TestPlacedSize: a dump's every function is placed, a million of them in
// a large one; placed stays at 24 bytes.
func TestPlacedSize(t *testing.T) {
	if n := unsafe.Sizeof(placed{}); n != 24 {
		t.Errorf("placed is %d bytes, want 24", n)
	}
}
