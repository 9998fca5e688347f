package objtool

import (
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/pprof/profile"

	"github.com/jitprof/jitprof/internal/elfsym"
	"github.com/jitprof/jitprof/internal/fixtures"
)

// TestOtherBuildID: the code of an ELF file whose build-id is not the one
// the recording gave its mapping is not shown for it: the file at the path
// was replaced since, or is another than a process in its own mount
// namespace mapped there (root's own, say). The file with the recorded
// build-id is shown as before.
func TestOtherBuildID(t *testing.T) {
	gcc := fixtures.LookPath(t, "gcc")
	dir := t.TempDir()
	src, bin := filepath.Join(dir, "f.c"), filepath.Join(dir, "f")
	if err := os.WriteFile(src, []byte("int f(int x) { return x * 3; }\nint main(void) { return f(1); }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(gcc, "-O1", "-no-pie", "-Wl,--build-id", "-o", bin, src).CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	table, err := elfsym.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	recorded := hex.EncodeToString(table.BuildID())
	var main elfsym.Symbol
	for s := range table.Symbols() {
		if s.Name == "main" {
			main = s
		}
	}
	table.Close()
	if recorded == "" || main.Name == "" {
		t.Fatalf("gcc's %s has build-id %q and main %+v", bin, recorded, main)
	}
	other := "00" + recorded[2:]
	for _, form := range forms {
		for _, tc := range []struct {
			buildID string
			shown   bool
		}{{recorded, true}, {"", true}, {other, false}} {
			m := &profile.Mapping{File: bin, Start: 0, Limit: ^uint64(0), BuildID: tc.buildID}
			tool := form.tool(&profile.Profile{Mapping: []*profile.Mapping{m}})
			fn, ok, err := funcAt(tool, m, main.Start)
			switch {
			case tc.shown && (!ok || err != nil || fn.Name != "main"):
				t.Errorf("%s, build-id %q: FuncIn = %+v, %v, %v; want main", form.name, tc.buildID, fn, ok, err)
			case !tc.shown && !errors.Is(err, elfsym.ErrOtherFile):
				t.Errorf("%s, build-id %q (the file's is %s): FuncIn = %+v, %v, %v; want ErrOtherFile", form.name, tc.buildID, recorded, fn, ok, err)
			}
			// pprof's driver names the mapping by its file and placement,
			// and a kernel relocation symbol, not a build-id; Disasm by
			// its file alone.
			if _, err := tool.Open(bin, 0, ^uint64(0), 0, ""); (err == nil) != tc.shown {
				t.Errorf("%s, build-id %q: Open = %v", form.name, tc.buildID, err)
			}
			if _, err := tool.Disasm(bin, main.Start, main.End-1, false); (err == nil) != tc.shown {
				t.Errorf("%s, build-id %q: Disasm = %v", form.name, tc.buildID, err)
			}
			tool.Close()
		}
		// Two files at one path (two containers'), told apart by their
		// build-ids: the driver's Disasm, which names the path alone,
		// cannot say which, and shows neither.
		tool := form.tool(&profile.Profile{Mapping: []*profile.Mapping{
			{ID: 1, File: bin, Start: 0x1000, Limit: 0x2000, BuildID: recorded},
			{ID: 2, File: bin, Start: 0x3000, Limit: 0x4000, BuildID: other}}})
		if _, err := tool.Disasm(bin, main.Start, main.End-1, false); err == nil || !strings.Contains(err.Error(), other) {
			t.Errorf("%s, two build-ids at %s: Disasm = %v, want an error naming both", form.name, bin, err)
		}
		tool.Close()
	}
}
