package elfsym

import (
	"os/exec"
	"path/filepath"
	"testing"
)

// TestStripped: a program keeps its full symbol table until strip removes
// it; then only its dynamic symbols are left, and the Table says so.
func TestStripped(t *testing.T) {
	dir := t.TempDir()
	exe := buildC(t, dir, "p.c", "int helper(int x) { return x * 3; }\nint main(int argc, char **argv) { return helper(argc); }\n")
	stripped := filepath.Join(dir, "p.stripped")
	need(t, "strip")
	if out, err := exec.Command("strip", "-o", stripped, exe).CombinedOutput(); err != nil {
		t.Fatalf("strip: %v\n%s", err, out)
	}
	for _, tc := range []struct {
		path string
		want bool
	}{{exe, false}, {stripped, true}} {
		tab, err := Open(tc.path)
		if err != nil {
			t.Fatal(err)
		}
		if got := tab.Stripped(); got != tc.want {
			t.Errorf("%s: Stripped() = %v, want %v", filepath.Base(tc.path), got, tc.want)
		}
		tab.Close()
	}
}
