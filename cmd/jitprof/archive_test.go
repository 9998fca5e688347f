package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jitprof/jitprof/internal/fixtures"
)

// TestArchive: a recording archived, with its own files then gone, reads
// in an empty directory as it read where it was made: report (text and
// call graph, jitted and native frames named), annotate of a jitted
// function, and gprof's files.
func TestArchive(t *testing.T) {
	fixtures.RealTier(t, "recording minijit")
	made := t.TempDir()
	bin := filepath.Join(made, "minijit")
	if err := os.Rename(fixtures.BuildTestJIT(t), bin); err != nil {
		t.Fatal(err)
	}
	t.Chdir(made)
	rec := filepath.Join(made, "rec")
	if code, _, stderr := jitprofMsg(t, "record", "-q", "-g", "-F", "999", "-o", rec+"/", "--", bin, "-duration", "0.3s"); code != 0 {
		t.Fatalf("record: exit %d\n%s", code, stderr)
	}
	data := filepath.Join(rec, "perf.data")
	reports := [][]string{
		{"report", "-q", "--children", "-g"},
		{"report", "-q", "--sort", "dso,sym"},
		{"annotate", "-q", "jit:loop_a"},
	}
	var before []string
	for _, args := range reports {
		code, out := jitprof(t, append(args, "-i", data)...)
		if code != 0 || !strings.Contains(out, "jit:loop_a") {
			t.Fatalf("%s here: exit %d\n%.1000s", args[0], code, out)
		}
		before = append(before, out)
	}
	if !strings.Contains(before[0], "main.main") {
		t.Fatalf("no native frame named here:\n%.2000s", before[0])
	}

	ar := filepath.Join(t.TempDir(), "rec.tar.gz")
	if code, _, stderr := jitprofMsg(t, "archive", "-i", data, "-o", ar); code != 0 || !strings.Contains(stderr, "files"+made+"/minijit") {
		t.Fatalf("archive: exit %d\n%s", code, stderr)
	}
	if err := os.RemoveAll(made); err != nil {
		t.Fatal(err)
	}
	elsewhere := t.TempDir()
	t.Chdir(elsewhere)
	for i, args := range reports {
		code, out := jitprof(t, append(args, "-i", ar)...)
		if code != 0 || out != before[i] {
			t.Errorf("%s of the archive: exit %d, differs from the report where it was made:\n%.2000s", args[0], code, out)
		}
	}
	if code, out := jitprof(t, "report", "-q", "-g", "--format", "gmon", "-o", filepath.Join(elsewhere, "gprof"), "-i", ar); code != 0 {
		t.Errorf("gmon of the archive: exit %d\n%s", code, out)
	}
	if left, _ := filepath.Glob(filepath.Join(os.TempDir(), "jitprof-archive-*")); len(left) > 0 {
		t.Errorf("unpacked archives left behind: %q", left)
	}
}
