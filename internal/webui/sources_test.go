package webui

import (
	"bytes"
	"github.com/jitprof/jitprof/internal/contract"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/pprof/profile"

	"github.com/jitprof/jitprof/internal/fixtures"
	"github.com/jitprof/jitprof/jitdump"
)

// sourceCase is a function of sourceProfile: its source file's name, and
// the line of that file its samples are at.
type sourceCase struct {
	fn, file string
	line     int64
	// shows is the text its source view must show, or "" for none of
	// the file.
	shows string
}

// sourceProfile is a profile of one sample in each function of cases, at
// an address of a mapping whose file does not exist, so that the driver
// lists the lines its profile names, and of one sample in the jitted
// function fn of a dump, whose lines name file.
func sourceProfile(t *testing.T, cases []sourceCase, dump, fn string) *profile.Profile {
	t.Helper()
	p := &profile.Profile{
		SampleType: []*profile.ValueType{{Type: "samples", Unit: "count"}},
		PeriodType: &profile.ValueType{Type: "cpu", Unit: "nanoseconds"},
		Period:     1,
	}
	native := &profile.Mapping{ID: 1, File: filepath.Join(t.TempDir(), "missing.so"), Start: 0x1000, Limit: 0x10000, HasFunctions: true}
	p.Mapping = []*profile.Mapping{native}
	add := func(m *profile.Mapping, addr uint64, name, file string, line int64) {
		f := &profile.Function{ID: uint64(len(p.Function) + 1), Name: name, SystemName: name, Filename: file}
		l := &profile.Location{ID: uint64(len(p.Location) + 1), Mapping: m, Address: addr, Line: []profile.Line{{Function: f, Line: line}}}
		p.Function = append(p.Function, f)
		p.Location = append(p.Location, l)
		p.Sample = append(p.Sample, &profile.Sample{Location: []*profile.Location{l}, Value: []int64{10}})
	}
	for i, c := range cases {
		add(native, 0x1000+uint64(i)*0x10, c.fn, c.file, c.line)
	}
	if dump != "" {
		jit := &profile.Mapping{ID: 2, File: dump, BuildID: contract.JITBuildID, Start: jitAddr, Limit: jitAddr + uint64(len(jitCode)), Offset: 1, HasFunctions: true}
		p.Mapping = append(p.Mapping, jit)
		add(jit, jitAddr+1, fn, "", 0)
	}
	if err := p.CheckValid(); err != nil {
		t.Fatal(err)
	}
	return p
}

// jitCode is a function's machine code (x86-64: push rbp; mov rbp,rsp;
// nop; pop rbp; ret) at jitAddr.
var jitCode = []byte{0x55, 0x48, 0x89, 0xe5, 0x90, 0x5d, 0xc3}

const jitAddr = 0x7f0000001000

// writeDump writes a dump of one function, fn, whose every instruction's
// line is line 1 of file.
func writeDump(t *testing.T, fn, file string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "jit-1.dump")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w, err := jitdump.NewWriter(f, jitdump.Header{ElfMach: 62, Pid: 1}) // EM_X86_64
	if err != nil {
		t.Fatal(err)
	}
	var lines []jitdump.DebugEntry
	for _, off := range []uint64{0, 1, 4, 5, 6} {
		lines = append(lines, jitdump.DebugEntry{Addr: jitAddr + off, Line: 1, File: file})
	}
	if _, err := w.Load(&jitdump.Function{Name: fn, Addr: jitAddr, Code: jitCode, Lines: lines}); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestSourceRule: the source and disassembly views show source files
// only from --source-dir, read inside it as its owner would, whatever
// name a profile or a dump gives; a root-only file named every way a name
// can reach it never shows. The directory is the attacker's, who planted
// links and a FIFO in it.
func TestSourceRule(t *testing.T) {
	a := fixtures.NewAttacker(t)
	canary := fixtures.NewCanary(t)
	dir := a.Dir(t)
	app := "const shownLine = 42 // app.js\n"
	util := "function shownUtil() {} // util.js\n"
	if err := os.MkdirAll(filepath.Join(dir, "lib"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, text := range map[string]string{"app.js": app, "lib/util.js": util} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		a.Chown(t, filepath.Join(dir, name))
	}
	for name, target := range map[string]string{
		"abs-link.js": canary.Path,                                 // absolute: resolved inside dir
		"up-link.js":  strings.Repeat("../", 20) + canary.Path[1:], // ".." stops at dir
		"dir-link":    filepath.Dir(canary.Path),
	} {
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
		a.Chown(t, filepath.Join(dir, name))
	}
	// A hard link to root's file (root made it: protected_hardlinks stops
	// others); read as the directory's owner, it is not readable.
	if err := os.Link(canary.Path, filepath.Join(dir, "hard.js")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo.js"), 0o666); err != nil {
		t.Fatal(err)
	}
	a.Chown(t, filepath.Join(dir, "fifo.js"))

	secret := canary.Path
	rel := secret[1:] // the driver searches a relative name in every parent of its search path, up to /
	cases := []sourceCase{
		{"shownRelative", "app.js", 1, "const shownLine = 42"},
		{"shownAbsolute", filepath.Join(dir, "lib/util.js"), 1, "function shownUtil()"},
		{"shownFromDir", "/lib/util.js", 1, "function shownUtil()"},
		{"secretAbsolute", secret, 1, ""},
		{"secretRelative", rel, 1, ""},
		{"secretClimbing", strings.Repeat("../", 20) + rel, 1, ""},
		{"secretDoubleSlash", "/" + secret, 1, ""},
		{"secretDotted", "/./" + rel, 1, ""},
		{"secretProcRoot", "/proc/self/root" + secret, 1, ""},
		{"secretProcCwd", "/proc/self/cwd/" + strings.Repeat("../", 20) + rel, 1, ""},
		{"secretAbsLink", "abs-link.js", 1, ""},
		{"secretUpLink", "up-link.js", 1, ""},
		{"secretDirLink", "dir-link/" + filepath.Base(secret), 1, ""},
		{"secretHardLink", "hard.js", 1, ""},
		{"secretFIFO", "fifo.js", 1, ""},
		{"secretOwnDir", "jitprof/../" + rel, 1, ""},
	}
	// A canary of its own, since the driver would find the profile's
	// names' files for it.
	dumpCanary := fixtures.NewCanary(t)
	dumped := "JS:*dumped"
	p := sourceProfile(t, cases, writeDump(t, dumped, dumpCanary.Path), dumped)

	var (
		mu       sync.Mutex
		warnings []string
	)
	srv := serveTest(t, p, Options{SourceDir: dir, Warn: func(err error) {
		mu.Lock()
		defer mu.Unlock()
		warnings = append(warnings, err.Error())
	}})
	var all bytes.Buffer
	for _, c := range cases {
		start := time.Now()
		text := get(t, srv.at("/ui/source", "f", "^"+regexp.QuoteMeta(c.fn)+"$"))
		all.WriteString(text)
		if !strings.Contains(text, c.fn) {
			t.Errorf("%s (%s): the source view does not list it:\n%s", c.fn, c.file, text)
		}
		if c.shows != "" && !strings.Contains(text, c.shows) {
			t.Errorf("%s (%s): the source view does not show %q:\n%s", c.fn, c.file, c.shows, text)
		}
		if c.shows == "" && (strings.Contains(text, "shownLine") || strings.Contains(text, "shownUtil")) {
			t.Errorf("%s (%s): the source view shows another file's text:\n%s", c.fn, c.file, text)
		}
		if d := time.Since(start); d > 10*time.Second { // a FIFO opened for reading would block for ever
			t.Errorf("%s: the source view took %v", c.fn, d)
		}
	}
	for _, view := range []string{"/ui/source", "/ui/disasm", "/ui/top", "/ui/flamegraph", "/ui/peek"} {
		all.WriteString(get(t, srv.at(view, "f", ".")))
	}
	// The dump's function: its instructions, their lines' file by name.
	text := get(t, srv.at("/ui/disasm", "f", regexp.QuoteMeta(dumped)))
	if !strings.Contains(text, "ROUTINE ======================== "+dumped) || !strings.Contains(text, filepath.Base(dumpCanary.Path)+":1") {
		t.Errorf("the disassembly of %s does not show it with its lines:\n%s", dumped, text)
	}
	all.WriteString(text)
	all.WriteString(get(t, srv.at("/ui/source", "f", regexp.QuoteMeta(dumped))))
	mu.Lock()
	defer mu.Unlock()
	for _, c := range []fixtures.Canary{canary, dumpCanary} {
		c.Absent(t, all.Bytes())
		c.Absent(t, []byte(strings.Join(warnings, "\n")))
	}
	for _, name := range []string{"hard.js", "fifo.js"} {
		if !slices.ContainsFunc(warnings, func(w string) bool { return strings.Contains(w, name) }) {
			t.Errorf("no warning says why %s is not shown: %q", name, warnings)
		}
	}
}

// TestSourceNames: every name the driver is given finds, as the driver
// looks it up (trimmed of trimPath, joined to its source path), a file of
// its own in the private directory, so that the driver searches nowhere
// else; names that find that file as they are keep them.
func TestSourceNames(t *testing.T) {
	s, err := newSources("", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	for _, c := range []struct {
		name string
		kept bool
	}{
		{"/home/user/app.js", true},
		{"app.js", true},
		{"lib/util.js", true},
		{"lib", false},           // a directory there already
		{"/lib/util.js", false},  // the file of "lib/util.js"
		{"lib/util.js/x", false}, // under a file
		{"../app.js", false},
		{"/../../etc/passwd", false},
		{"//etc/passwd", false},
		{"a//b.js", false},
		{"a/./b.js", false},
		{"a/../b.js", false},
		{"dir/", false},
		{"/", false},
		{".", false},
		{"..", false},
		{"jitprof/open.html", false},
		{"/jitprof", false},
		{"nul\x00.js", false},
		{strings.Repeat("long", 100) + ".js", false},
		{"node:internal/main", true},
	} {
		got := s.name(c.name)
		if again := s.name(c.name); again != got {
			t.Errorf("%q: given %q, then %q", c.name, got, again)
		}
		if kept := got == c.name; kept != c.kept {
			t.Errorf("%q: given %q, kept %v, want %v", c.name, got, kept, c.kept)
		}
		rel := strings.TrimPrefix(got, trimPath)
		if !filepath.IsLocal(rel) {
			t.Errorf("%q: given %q, which the driver looks up as %q, outside its source path", c.name, got, rel)
			continue
		}
		if fi, err := os.Lstat(filepath.Join(s.dir, rel)); err != nil || !fi.Mode().IsRegular() {
			t.Errorf("%q: given %q, and %s is not a file: %v", c.name, got, rel, err)
		}
	}
	if got := s.name(""); got != "" {
		t.Errorf("no name: given %q", got)
	}
}
