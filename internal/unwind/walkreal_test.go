package unwind

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/jitprof/jitprof/internal/elfsym"
	"github.com/jitprof/jitprof/internal/fixtures"
)

// A real stack, taken as perf takes one (registers and a copy from rsp
// up) inside qsort's comparison callback in a program of its own, walks
// to the return addresses glibc's backtrace() (libgcc's DWARF unwinder)
// finds on the same stack: through the program's functions with and
// without frame pointers, libc's qsort, main and libc's start-up to
// _start, with each module's table from OpenELF and the file offsets its
// mappings give.
func TestWalkMatchesBacktrace(t *testing.T) {
	fixtures.RealTier(t, "compiling with gcc")
	gcc := fixtures.LookPath(t, "gcc")
	for _, opt := range []string{"-O0", "-O2"} {
		t.Run(opt, func(t *testing.T) {
			dir := t.TempDir()
			bin, stackFile := filepath.Join(dir, "walk"), filepath.Join(dir, "stack")
			if out, err := exec.Command(gcc, opt, "-g", "-fomit-frame-pointer", "-o", bin, filepath.Join("testdata", "walk.c")).CombinedOutput(); err != nil {
				t.Fatalf("gcc: %v\n%s", err, out)
			}
			out, err := exec.Command(bin, stackFile).Output()
			if err != nil {
				t.Fatalf("walk: %v", err)
			}
			stack, err := os.ReadFile(stackFile)
			if err != nil {
				t.Fatal(err)
			}
			regs, bt, maps := parseWalkOutput(t, out)
			find := mapsFinder(t, maps)
			pcs, stop := Walk(regs, stack, find, nil)
			// backtrace's first address is its own return into capture,
			// where the walk has the capture's IP: both are in capture.
			if len(pcs) < 2 || !slices.Equal(pcs[1:], bt[1:]) {
				t.Errorf("Walk = %#x (%v)\nbacktrace %#x", pcs, stop, bt)
			}
			if stop != StopOutermost {
				t.Errorf("stopped: %v", stop)
			}
			if len(bt) < 8 {
				t.Errorf("backtrace has %d frames: the callback is not inside qsort", len(bt))
			}
			t.Logf("%d frames equal backtrace's, %v", len(pcs), stop)
		})
	}
}

type mapping struct {
	start, end, off uint64
	path            string
}

func parseWalkOutput(t *testing.T, out []byte) (Regs, []uint64, []mapping) {
	var regs Regs
	var bt []uint64
	var maps []mapping
	hex := func(s string) uint64 {
		v, err := strconv.ParseUint(s, 16, 64)
		if err != nil {
			t.Fatalf("%q: %v", s, err)
		}
		return v
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) == 4 && f[0] == "regs":
			regs = Regs{IP: hex(f[1]), SP: hex(f[2]), FP: hex(f[3])}
		case len(f) > 0 && f[0] == "bt":
			for _, s := range f[1:] {
				bt = append(bt, hex(s))
			}
		case len(f) == 6 && strings.Contains(f[1], "x") && strings.HasPrefix(f[5], "/"):
			lo, hi, _ := strings.Cut(f[0], "-")
			maps = append(maps, mapping{hex(lo), hex(hi), hex(f[2]), f[5]})
		}
	}
	if regs.SP == 0 || len(bt) == 0 || len(maps) == 0 {
		t.Fatalf("walk printed no registers, backtrace or maps:\n%s", out)
	}
	return regs, bt, maps
}

// mapsFinder gives the rule of a pc through the executable mapping that
// holds it: its file offset, the file's address for it, the file's table.
func mapsFinder(t *testing.T, maps []mapping) func(uint64) (Rule, bool) {
	tabs := map[string]*Table{}
	for _, m := range maps {
		if tabs[m.path] != nil {
			continue
		}
		tab, err := OpenELF(m.path, elfsym.Recorded{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		tabs[m.path] = tab
	}
	return func(pc uint64) (Rule, bool) {
		for _, m := range maps {
			if pc >= m.start && pc < m.end {
				addr, ok := tabs[m.path].AddrOf(pc - m.start + m.off)
				if !ok {
					return Rule{}, false
				}
				return tabs[m.path].Lookup(addr)
			}
		}
		return Rule{}, false
	}
}
