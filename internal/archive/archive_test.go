package archive

import (
	"archive/tar"
	"compress/gzip"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeTar writes a gzip-compressed tar of the given names and contents.
func writeTar(t *testing.T, files [][2]string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "a.tar.gz")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	gz := gzip.NewWriter(f)
	tw := tar.NewWriter(gz)
	for _, file := range files {
		if err := addBytes(tw, file[0], []byte(file[1])); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// Extract unpacks what a jitprof archive holds and refuses anything else,
// leaving nothing behind when it does.
func TestExtract(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files [][2]string
		err   string // "" for success
	}{
		{"whole", [][2]string{{"perf.data", "P"}, {"jit-1.dump", "D"}, {"files/usr/bin/node", "E"}, {"kallsyms", "K"}, {"vdso.so", "V"}}, ""},
		{"outside its directory", [][2]string{{"perf.data", "P"}, {"../escape", "x"}}, "not a file of a jitprof archive"},
		{"absolute", [][2]string{{"/etc/passwd", "x"}}, "not a file of a jitprof archive"},
		{"twice", [][2]string{{"perf.data", "P"}, {"perf.data", "Q"}}, "exists"},
		{"no recording", [][2]string{{"jit-1.dump", "D"}}, "no perf.data"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ar := writeTar(t, tc.files)
			if !Is(ar) {
				t.Fatal("Is says it is not an archive")
			}
			tmp := t.TempDir()
			x, err := Extract(ar, tmp)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), ar) {
					t.Errorf("error %v, want one naming %s and saying %q", err, ar, tc.err)
				}
				if left, _ := os.ReadDir(tmp); len(left) > 0 {
					t.Errorf("left behind: %v", left)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, file := range tc.files {
				if b, err := os.ReadFile(filepath.Join(x.Dir, file[0])); err != nil || string(b) != file[1] {
					t.Errorf("%s: %q, %v", file[0], b, err)
				}
			}
			if x.Files.Kallsyms == "" || x.Files.VDSO == "" || x.Files.Path("/usr/bin/node") != filepath.Join(x.Dir, "files/usr/bin/node") || x.Files.Path("/usr/bin/perl") != "/usr/bin/perl" {
				t.Errorf("copies: %+v", x.Files)
			}
			if err := x.Close(); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(x.Dir); !os.IsNotExist(err) {
				t.Errorf("Close left %s", x.Dir)
			}
		})
	}
	if Is(filepath.Join(t.TempDir(), "none")) {
		t.Error("a missing file is an archive")
	}
}
