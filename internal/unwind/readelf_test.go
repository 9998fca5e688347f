package unwind

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/jitprof/jitprof/internal/elfsym"
	"github.com/jitprof/jitprof/internal/fixtures"
)

// hostLibraries are the real files whose tables are checked against
// readelf: C (glibc), C++ (libstdc++, node, HotSpot's libjvm) and CPython,
// built by different compilers and flags (node and libjvm keep frame
// pointers, libpython does not).
func hostLibraries(t *testing.T) map[string]string {
	files := map[string]string{
		"libc":      "/lib/x86_64-linux-gnu/libc.so.6",
		"libstdc++": "/usr/lib/x86_64-linux-gnu/libstdc++.so.6",
		"node":      fixtures.LookPath(t, "node"),
	}
	if java, err := filepath.EvalSymlinks(fixtures.LookPath(t, "java")); err == nil {
		files["libjvm"] = filepath.Join(filepath.Dir(java), "..", "lib", "server", "libjvm.so")
	}
	py, err := filepath.EvalSymlinks(fixtures.Python313(t))
	if err != nil {
		t.Fatal(err)
	}
	files["python3.13"] = py
	if lib, _ := filepath.Glob(filepath.Join(filepath.Dir(py), "..", "lib", "libpython3.*.so.1.0")); len(lib) > 0 {
		files["libpython"] = lib[0]
	}
	for name, p := range files {
		if _, err := os.Stat(p); err != nil {
			if os.Getenv("CI") != "" {
				t.Errorf("%s: %v", name, err)
			}
			delete(files, name)
		}
	}
	return files
}

// Every row of the tables equals what readelf --debug-dump=frames-interp
// shows for the CFA, rbp and return address columns, at every row boundary,
// and the table changes nowhere else. Rows readelf shows as expressions
// ("exp") must have no rule, except GNU ld's lazy PLT expression (read
// from readelf's raw dump), which must be KindPLT; so must rows whose CFA is
// another register, or whose rbp or return address is in a register.
func TestMatchesReadelf(t *testing.T) {
	fixtures.RealTier(t, "readelf on the host's libraries")
	readelf := fixtures.LookPath(t, "readelf")
	for name, path := range hostLibraries(t) {
		t.Run(name, func(t *testing.T) {
			tab, err := OpenELF(path, elfsym.Recorded{}, nil)
			if err != nil {
				t.Fatal(err)
			}
			checkReadelf(t, readelf, tab, path, name != "python3.13")
		})
	}
	// The vDSO is read from memory: readelf reads the same bytes from a file.
	t.Run("vdso", func(t *testing.T) {
		img, err := elfsym.VDSOImage()
		if err != nil {
			t.Fatal(err)
		}
		tab, err := FromELFImage(img, "[vdso]")
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(t.TempDir(), "vdso.so")
		if err := os.WriteFile(path, img, 0o644); err != nil {
			t.Fatal(err)
		}
		checkReadelf(t, readelf, tab, path, false)
	})
}

// checkReadelf compares tab, the table of the file at path, with readelf's
// rows of it; many says the file has a thousand rows at least.
func checkReadelf(t *testing.T, readelf string, tab *Table, path string, many bool) {
	t.Helper()
	if err := tab.Err(); err != nil {
		t.Errorf("Err: %v", err)
	}
	interp, err := exec.Command(readelf, "--debug-dump=frames-interp", "--debug-dump=no-follow-links", "-W", path).Output()
	if err != nil {
		t.Fatal(err)
	}
	rawDump, err := exec.Command(readelf, "--debug-dump=frames", "--debug-dump=no-follow-links", "-W", path).Output()
	if err != nil {
		t.Fatal(err)
	}
	fdes := parseReadelf(t, interp, pltFDEs(rawDump))
	rows, mismatches := compareReadelf(tab, fdes, path)
	for i, m := range mismatches {
		if i == 10 {
			t.Errorf("... %d mismatches in all", len(mismatches))
			break
		}
		t.Error(m)
	}
	t.Logf("%s: %d FDEs, %d readelf rows equal; table %d rows, %d bytes", path, len(fdes), rows, tab.Len(), tab.Size())
	if rows == 0 || (many && rows < 1000) {
		t.Errorf("only %d rows compared", rows)
	}
}

// rfde is an FDE as readelf shows it.
type rfde struct {
	off        string // of the entry, hex as readelf prints it
	start, end uint64
	locs       []uint64
	rules      []Rule
}

var (
	fdeLine = regexp.MustCompile(`^([0-9a-f]+) [0-9a-f]+ [0-9a-f]+ (FDE cie=([0-9a-f]+) pc=([0-9a-f]+)\.\.([0-9a-f]+)|CIE)`)
	rowLine = regexp.MustCompile(`^[0-9a-f]{16} `)
	offCol  = regexp.MustCompile(`^c([+-]\d+)$`)
	cfaCol  = regexp.MustCompile(`^(rsp|rbp)([+-]\d+)$`)
	pltText = regexp.MustCompile(`DW_CFA_def_cfa_expression \(DW_OP_breg7 \(rsp\): (\d+); DW_OP_breg16 \(rip\): 0; DW_OP_lit15; DW_OP_and; DW_OP_lit(\d+); DW_OP_ge; DW_OP_lit3; DW_OP_shl; DW_OP_plus\)`)
)

// pltFDEs finds, in readelf's raw dump, the FDEs whose CFA expression is
// the lazy PLT's, with the rule their "exp" rows mean.
func pltFDEs(raw []byte) map[string]Rule {
	plt := map[string]Rule{}
	var cur string
	for _, line := range strings.Split(string(raw), "\n") {
		if m := fdeLine.FindStringSubmatch(line); m != nil {
			cur = m[1]
		}
		if m := pltText.FindStringSubmatch(line); m != nil {
			off, _ := strconv.Atoi(m[1])
			lit, _ := strconv.Atoi(m[2])
			plt[cur] = Rule{Kind: KindPLT, CFAOff: int32(off), RAOff: -8, PLTMin: uint8(lit)}
		}
	}
	return plt
}

// parseReadelf reads the FDEs of frames-interp output, each row turned
// into the Rule it means. An FDE readelf shows no rows for (its program
// is all DW_CFA_nop) has its CIE's first row.
func parseReadelf(t *testing.T, out []byte, plt map[string]Rule) []rfde {
	var fdes []rfde
	cieRule := map[string]Rule{}
	var cur *rfde
	var curCIE string
	var cols []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if m := fdeLine.FindStringSubmatch(line); m != nil {
			cur, curCIE = nil, ""
			if m[2] == "CIE" {
				curCIE = m[1]
				continue
			}
			start, _ := strconv.ParseUint(m[4], 16, 64)
			end, _ := strconv.ParseUint(m[5], 16, 64)
			fdes = append(fdes, rfde{off: m[1], start: start, end: end})
			cur = &fdes[len(fdes)-1]
			if r, ok := cieRule[m[3]]; ok {
				cur.locs, cur.rules = []uint64{start}, []Rule{r} // replaced by the FDE's own rows
			}
			continue
		}
		if strings.HasPrefix(line, "   LOC") {
			cols = strings.Fields(line)
			if cur != nil {
				cur.locs, cur.rules = nil, nil
			}
			continue
		}
		if !rowLine.MatchString(line) {
			continue
		}
		// A register rule prints as "r3 (rbx)": the parenthesis goes with
		// the field before it.
		var fields []string
		for _, f := range strings.Fields(line) {
			if strings.HasPrefix(f, "(") && len(fields) > 0 {
				fields[len(fields)-1] += " " + f
				continue
			}
			fields = append(fields, f)
		}
		if len(fields) != len(cols) {
			t.Fatalf("readelf row %q does not fit the columns %q", line, cols)
		}
		col := map[string]string{"rbp": "u"}
		for i, c := range cols {
			col[c] = fields[i]
		}
		loc, _ := strconv.ParseUint(fields[0], 16, 64)
		var off string
		if cur != nil {
			off = cur.off
		}
		r := readelfRule(col, plt[off])
		switch {
		case curCIE != "":
			if _, ok := cieRule[curCIE]; !ok {
				cieRule[curCIE] = r
			}
		case cur != nil && loc < cur.end:
			if n := len(cur.locs); n > 0 && cur.locs[n-1] == loc {
				cur.rules[n-1] = r // an empty row: the later one holds
			} else {
				cur.locs, cur.rules = append(cur.locs, loc), append(cur.rules, r)
			}
		}
	}
	return fdes
}

// readelfRule is the Rule a readelf row means (see TestMatchesReadelf).
func readelfRule(col map[string]string, plt Rule) Rule {
	var r Rule
	ra := col["ra"]
	if ra == "u" {
		return Rule{Kind: KindEnd}
	}
	m := offCol.FindStringSubmatch(ra)
	if m == nil {
		return Rule{}
	}
	n, _ := strconv.Atoi(m[1])
	r.RAOff = int16(n)
	switch bp := col["rbp"]; bp {
	case "u", "s":
	default:
		m := offCol.FindStringSubmatch(bp)
		if m == nil || m[1] == "+0" {
			return Rule{}
		}
		n, _ := strconv.Atoi(m[1])
		r.FPOff = int16(n)
	}
	cfa := col["CFA"]
	if cfa == "exp" {
		if plt.Kind != KindPLT || plt.RAOff != r.RAOff || r.FPOff != 0 {
			return Rule{}
		}
		return plt
	}
	m = cfaCol.FindStringSubmatch(cfa)
	if m == nil {
		return Rule{}
	}
	n, _ = strconv.Atoi(m[2])
	r.CFAOff, r.Kind = int32(n), KindSP
	if m[1] == "rbp" {
		r.Kind = KindFP
	}
	return r
}

// compareReadelf checks tab against readelf's FDEs: the rule at each row's
// start, none at an FDE's end where no other FDE starts, and no row
// boundary of the table anywhere else.
func compareReadelf(tab *Table, fdes []rfde, path string) (rows int, bad []string) {
	bounds := map[uint64]bool{}
	starts := map[uint64]bool{}
	for _, f := range fdes {
		starts[f.start] = true
	}
	for _, f := range fdes {
		bounds[f.end] = true
		for i, loc := range f.locs {
			bounds[loc] = true
			want := f.rules[i]
			got, ok := tab.Lookup(loc)
			if got != want || ok != (want.Kind != KindNone) {
				bad = append(bad, fmt.Sprintf("%s: FDE at %s, pc %#x: Lookup = %v, %v; readelf %v", path, f.off, loc, got, ok, want))
				continue
			}
			rows++
		}
		if !starts[f.end] {
			if got, ok := tab.Lookup(f.end); ok {
				bad = append(bad, fmt.Sprintf("%s: FDE at %s ends at %#x: Lookup = %v after it", path, f.off, f.end, got))
			}
		}
	}
	for _, a := range tab.addr {
		if pc := tab.base + uint64(a); !bounds[pc] {
			got, _ := tab.Lookup(pc)
			bad = append(bad, fmt.Sprintf("%s: the table changes to %v at %#x, where readelf has no row", path, got, pc))
		}
	}
	return rows, bad
}
