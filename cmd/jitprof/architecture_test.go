package main

import (
	"go/build"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestArchitecture holds docs/architecture.md's table of internal packages
// to the code: every package has a row, "reads from" is exactly what it
// imports of jitprof's, and "used by" exactly the packages that import it
// (the commands standing for cmd/jitprof; tests and test generators aside).
func TestArchitecture(t *testing.T) {
	const module = "github.com/jitprof/jitprof/"
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(filepath.Join(root, "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	// name: "jitdump" for a public package, "record" for internal/record.
	imports := make(map[string][]string)
	short := func(path string) (string, bool) {
		rest, ok := strings.CutPrefix(path, module)
		if !ok {
			return "", false
		}
		return strings.TrimPrefix(rest, "internal/"), true
	}
	filepath.WalkDir(root, func(dir string, d os.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		// The directories the go command ignores hold no package of the
		// module (a local scratch program under _name, say).
		if base := d.Name(); base == "testdata" || base == "node_modules" || strings.HasPrefix(base, ".") || strings.HasPrefix(base, "_") {
			return filepath.SkipDir
		}
		pkg, err := build.ImportDir(dir, 0)
		if err != nil {
			return nil // no Go files
		}
		rel, _ := filepath.Rel(root, dir)
		name, _ := short(module + filepath.ToSlash(rel))
		for _, imp := range pkg.Imports {
			if s, ok := short(imp); ok {
				imports[name] = append(imports[name], s)
			}
		}
		if imports[name] == nil {
			imports[name] = []string{}
		}
		return nil
	})
	importers := func(pkg string) []string {
		var out []string
		for name, imps := range imports {
			if !slices.Contains(imps, pkg) {
				continue
			}
			switch {
			case name == "cmd/jitprof":
				out = append(out, "the commands")
			case name == "fixtures", strings.HasPrefix(name, "examples/"), strings.Contains(name, "synth"):
				// tests' helpers and generators
			default:
				out = append(out, name)
			}
		}
		return out
	}
	list := func(cell string) []string {
		var out []string
		for _, f := range strings.Split(cell, ",") {
			if f = strings.Trim(strings.TrimSpace(f), "`"); f != "" {
				out = append(out, f)
			}
		}
		return out
	}
	same := func(a, b []string) bool {
		a, b = slices.Clone(a), slices.Clone(b)
		slices.Sort(a)
		slices.Sort(b)
		return slices.Equal(slices.Compact(a), slices.Compact(b))
	}

	rows := make(map[string]bool)
	_, table, _ := strings.Cut(string(doc), "## Internal packages")
	table, _, _ = strings.Cut(table, "\n## ")
	for line := range strings.Lines(table) {
		cells := strings.Split(strings.TrimSpace(line), "|")
		if len(cells) != 6 || !strings.HasPrefix(strings.TrimSpace(cells[1]), "`") {
			continue
		}
		names := list(cells[1])
		for _, n := range names {
			rows[n] = true
		}
		if len(names) != 1 {
			continue // a row of small pieces, whose columns stay empty
		}
		pkg := names[0]
		imps, ok := imports[pkg]
		if !ok {
			t.Errorf("docs/architecture.md has a row for %s, which is no package", pkg)
			continue
		}
		if reads := list(cells[3]); !same(reads, imps) {
			t.Errorf("%s reads from %q, the doc says %q", pkg, imps, reads)
		}
		used := list(cells[4])
		if slices.Contains(used, "tests") {
			continue
		}
		if got := importers(pkg); !same(used, got) {
			t.Errorf("%s is used by %q, the doc says %q", pkg, got, used)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(imports)) {
		if !strings.Contains(name, "/") && !rows[name] && !slices.Contains([]string{"jitdump", "perfmap", "perfdata", "jitelf", "agents"}, name) {
			t.Errorf("docs/architecture.md has no row for internal/%s", name)
		}
	}
}
