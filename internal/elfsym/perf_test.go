package elfsym

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/jitprof/jitprof/internal/demangle"
	"github.com/jitprof/jitprof/internal/fixtures"
)

// These tests record real programs with perf and check that every address
// perf script resolved, in the programs, their libraries, the vDSO and
// the kernel, resolves here to the same symbol, as perf report would
// show it.

// need returns the path of a program the test needs. Without it the test
// is skipped, except under CI, where everything must be there.
func need(t *testing.T, name string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is needed: %v", name, err)
		}
		t.Skipf("%s is needed: %v", name, err)
	}
	return path
}

// perfEnv makes dir perf's home: perf record copies every binary it
// sees, and the vDSO, into ~/.debug, where perf script then reads the
// vDSO from. The test leaves no copies behind and depends on none left
// by other runs.
func perfEnv(dir string) []string {
	return append(os.Environ(), "HOME="+dir)
}

// record runs cmd under perf record with call graphs, and returns the
// perf.data file.
func record(t *testing.T, dir string, cmd ...string) string {
	t.Helper()
	need(t, "perf")
	data := filepath.Join(dir, "perf.data")
	c := exec.Command("perf", append([]string{"record", "-q", "-g", "-F", "10000", "-o", data, "--"}, cmd...)...)
	c.Env = perfEnv(dir)
	if out, err := c.CombinedOutput(); err != nil {
		t.Fatalf("perf record %s: %v\n%s", strings.Join(cmd, " "), err, out)
	}
	return data
}

// A perfFrame is one address perf script resolved: a sample's or a
// callchain entry's. For code in files and the vDSO perf prints the
// address in its own address space for the file, the file offset.
type perfFrame struct {
	addr      uint64
	raw, name string // perf's symbol, raw and as perf report shows it
	dso       string
}

func perfFrames(t *testing.T, data string) []perfFrame {
	t.Helper()
	run := func(args ...string) []perfFrame {
		c := exec.Command("perf", append([]string{"script", "-i", data, "-F", "ip,sym,dso"}, args...)...)
		c.Env = perfEnv(filepath.Dir(data))
		out, err := c.Output()
		if err != nil {
			t.Fatalf("perf script: %v", err)
		}
		var frames []perfFrame
		sc := bufio.NewScanner(bytes.NewReader(out))
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			// "    7f03e7244c5d __strlen_evex (/usr/lib/x86_64-linux-gnu/libc.so.6)"
			hex, rest, _ := strings.Cut(strings.TrimSpace(sc.Text()), " ")
			addr, err := strconv.ParseUint(hex, 16, 64)
			i := strings.LastIndex(rest, " (")
			if err != nil || i < 0 || !strings.HasSuffix(rest, ")") {
				continue
			}
			frames = append(frames, perfFrame{addr: addr, name: rest[:i], dso: rest[i+2 : len(rest)-1]})
		}
		return frames
	}
	raw, shown := run("--no-demangle"), run()
	if len(raw) != len(shown) {
		t.Fatalf("perf script gave %d frames with --no-demangle, %d without", len(raw), len(shown))
	}
	for i := range raw {
		raw[i].raw = raw[i].name
		raw[i].name = shown[i].name
	}
	return raw
}

// agreement counts, for each file (or [vdso], [kernel.kallsyms]), the
// frames perf resolved and those resolved here differently.
type agreement struct {
	frames, differ map[string]int
	diffs          map[string]int // "file: perf name != our name"
}

func compareWithPerf(t *testing.T, data string) agreement {
	t.Helper()
	a := agreement{map[string]int{}, map[string]int{}, map[string]int{}}
	tables := map[string]*Table{}
	table := func(dso string) *Table {
		tab, ok := tables[dso]
		if ok {
			return tab
		}
		var err error
		switch {
		case dso == "[kernel.kallsyms]":
			tab, err = ReadKallsyms("/proc/kallsyms")
		case dso == "[vdso]":
			tab, err = VDSO()
		case strings.HasPrefix(dso, "/"):
			if tab, err = Open(dso); err != nil && strings.HasPrefix(filepath.Base(dso), "perf-") {
				err = nil // a JIT's perf map, not ELF
			}
		}
		if err != nil {
			t.Errorf("%s: %v", dso, err)
		}
		tables[dso] = tab
		return tab
	}
	for _, f := range perfFrames(t, data) {
		tab := table(f.dso)
		if tab == nil {
			continue
		}
		addr, ok := f.addr, true
		if f.dso != "[kernel.kallsyms]" {
			addr, ok = tab.Vaddr(f.addr)
		}
		raw, name := "[unknown]", "[unknown]"
		if ok {
			if s, found := tab.Lookup(addr); found {
				raw, name = s.Name, s.Name
				if f.dso != "[kernel.kallsyms]" {
					name = demangle.Name(s.Name)
				}
			}
		}
		a.frames[f.dso]++
		if raw != f.raw || name != f.name {
			a.differ[f.dso]++
			a.diffs[fmt.Sprintf("%s at %#x: perf %q (%q), here %q (%q)", f.dso, f.addr, f.raw, f.name, raw, name)]++
		}
	}
	return a
}

// check requires at least 99.5% agreement on each file named and on the
// kernel, and that the files named were seen at all.
func (a agreement) check(t *testing.T, files ...string) {
	t.Helper()
	for dso, n := range a.frames {
		t.Logf("%6d frames, %4d differ: %s", n, a.differ[dso], dso)
	}
	var diffs []string
	for d, n := range a.diffs {
		diffs = append(diffs, fmt.Sprintf("%5d× %s", n, d))
	}
	slices.Sort(diffs)
	for _, d := range diffs {
		t.Log(d)
	}
	for _, dso := range append(files, "[kernel.kallsyms]") {
		n := a.frames[dso]
		if n == 0 && dso != "[kernel.kallsyms]" {
			t.Errorf("perf resolved no frames in %s", dso)
		}
		if n > 0 && float64(a.differ[dso]) > 0.005*float64(n) {
			t.Errorf("%s: %d of %d frames resolve differently from perf", dso, a.differ[dso], n)
		}
	}
}

// buildC compiles a C (or, with a .cc name, C++) program in dir.
func buildC(t *testing.T, dir, name, src string, flags ...string) string {
	t.Helper()
	compiler := "gcc"
	if strings.HasSuffix(name, ".cc") {
		compiler = "g++"
	}
	need(t, compiler)
	srcPath := filepath.Join(dir, name)
	if err := os.WriteFile(srcPath, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	exe := strings.TrimSuffix(srcPath, filepath.Ext(srcPath))
	args := append([]string{"-O1", "-fno-builtin", "-o", exe, srcPath}, flags...)
	if out, err := exec.Command(compiler, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v\n%s", compiler, strings.Join(args, " "), err, out)
	}
	return exe
}

// pltProgram spends much of its time in PLT stubs, libc and the vDSO.
const pltProgram = `
#include <stdlib.h>
#include <string.h>
#include <time.h>
int main(int argc, char **argv) {
	volatile long sum = 0;
	const char *s = argc > 5 ? argv[1] : "x";
	struct timespec ts;
	for (long i = 0; i < 20000000; i++) {
		sum += strlen(s);
		sum += labs(i);
		if (i % 16 == 0) {
			clock_gettime(CLOCK_MONOTONIC, &ts);
			sum += ts.tv_nsec;
		}
	}
	return sum == 42;
}
`

// aliasProgram has a hot function under names of every kind, at one
// address, an unsized function, and a function nested in another: perf's
// choice among duplicates, its fix-up of ends and its tree walk decide
// the names.
const aliasProgram = `
__asm__(
	".text\n"
	".globl hot_global\n.type hot_global,@function\n"
	".weak hot_weak\n.type hot_weak,@function\n"
	".type hot_local,@function\n"
	".globl _hot_underscore\n.type _hot_underscore,@function\n"
	".globl hot_notype\n"
	"hot_notype:\nhot_local:\n_hot_underscore:\nhot_weak:\nhot_global:\n"
	"	mov $30000, %ecx\n1: dec %ecx\n jnz 1b\n ret\n"
	".size hot_global, .-hot_global\n.size hot_weak, .-hot_weak\n"
	".size hot_local, .-hot_local\n"
	".globl unsized\n.type unsized,@function\n"
	"unsized:\n mov $30000, %ecx\n2: dec %ecx\n jnz 2b\n"
	".type outer,@function\nouter:\n mov $30000, %ecx\n3: dec %ecx\n jnz 3b\n"
	".type nested,@function\nnested:\n mov $30000, %ecx\n4: dec %ecx\n jnz 4b\n ret\n"
	".size nested, .-nested\n.size outer, .-outer\n"
);
void hot_global(void);
void unsized(void);
int main(void) {
	for (int i = 0; i < 20000; i++) {
		hot_global();
		unsized();
	}
	return 0;
}
`

const cxxProgram = `
#include <algorithm>
#include <map>
#include <string>
#include <vector>
namespace {
template <typename T> struct Box { T v; bool operator<(const Box &o) const { return v < o.v; } };
}
int main() {
	std::map<std::string, int> m;
	std::vector<Box<long>> v;
	for (int round = 0; round < 40; round++) {
		for (int i = 0; i < 20000; i++) {
			m[std::to_string(i * 7919 % 10007)] += i;
			v.push_back(Box<long>{(long)(i * 2654435761u % 1000003)});
		}
		std::sort(v.begin(), v.end());
		v.clear();
	}
	return m.size() == 1;
}
`

func TestAgreesWithPerf(t *testing.T) {
	fixtures.RealTier(t, "perf record and perf script")
	tests := []struct {
		name  string
		build func(t *testing.T, dir string) (cmd []string, files []string)
	}{
		{"pie-plt", func(t *testing.T, dir string) ([]string, []string) {
			exe := buildC(t, dir, "plt.c", pltProgram)
			return []string{exe}, []string{exe, libc(t, exe), "[vdso]"}
		}},
		{"nopie-plt", func(t *testing.T, dir string) ([]string, []string) {
			exe := buildC(t, dir, "plt.c", pltProgram, "-no-pie")
			return []string{exe}, []string{exe}
		}},
		{"ibt-plt-sec", func(t *testing.T, dir string) ([]string, []string) {
			amd64Only(t)
			exe := buildC(t, dir, "plt.c", pltProgram, "-fcf-protection=full", "-Wl,-z,ibtplt")
			return []string{exe}, []string{exe}
		}},
		{"static", func(t *testing.T, dir string) ([]string, []string) {
			exe := buildC(t, dir, "plt.c", pltProgram, "-static")
			return []string{exe}, []string{exe}
		}},
		{"aliases", func(t *testing.T, dir string) ([]string, []string) {
			amd64Only(t)
			exe := buildC(t, dir, "alias.c", aliasProgram)
			return []string{exe}, []string{exe}
		}},
		{"debuglink", func(t *testing.T, dir string) ([]string, []string) {
			exe := buildC(t, dir, "plt.c", pltProgram, "-g")
			splitDebug(t, exe, filepath.Join(dir, ".debug", "plt.debug"))
			return []string{exe}, []string{exe}
		}},
		{"cxx", func(t *testing.T, dir string) ([]string, []string) {
			exe := buildC(t, dir, "prog.cc", cxxProgram)
			return []string{exe}, []string{exe}
		}},
		{"node", func(t *testing.T, dir string) ([]string, []string) {
			node := need(t, "node")
			exe, err := filepath.EvalSymlinks(node)
			if err != nil {
				t.Fatal(err)
			}
			return []string{exe, "-e", "let s = 0; for (let i = 0; i < 3e7; i++) s += Math.sqrt(i) | 0; JSON.stringify(Array.from({length: 1e5}, (_, i) => ({i})))"}, []string{exe}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			cmd, files := tt.build(t, dir)
			compareWithPerf(t, record(t, dir, cmd...)).check(t, files...)
		})
	}
}

// amd64Only skips a test of x86-64 code or PLTs.
func amd64Only(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skip("x86-64 only")
	}
}

// libc returns the C library exe runs with, as the kernel names it.
func libc(t *testing.T, exe string) string {
	t.Helper()
	out, err := exec.Command("ldd", exe).Output()
	if err != nil {
		t.Fatalf("ldd %s: %v", exe, err)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if _, path, ok := strings.Cut(line, "libc.so.6 => "); ok {
			path, _, _ = strings.Cut(path, " ")
			if real, err := filepath.EvalSymlinks(path); err == nil {
				return real
			}
			return path
		}
	}
	t.Fatalf("no libc in ldd %s:\n%s", exe, out)
	return ""
}

// splitDebug moves exe's symbols to a debug file, linked from exe.
func splitDebug(t *testing.T, exe, debug string) {
	t.Helper()
	need(t, "objcopy")
	if err := os.MkdirAll(filepath.Dir(debug), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"--only-keep-debug", exe, debug},
		{"--strip-all", "--add-gnu-debuglink=" + debug, exe},
	} {
		if out, err := exec.Command("objcopy", args...).CombinedOutput(); err != nil {
			t.Fatalf("objcopy %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}
