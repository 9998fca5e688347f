package annotate

import (
	"bytes"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/pprof/profile"

	"github.com/jitprof/jitprof/internal/contract"
	"github.com/jitprof/jitprof/internal/disasm"
	"github.com/jitprof/jitprof/internal/dumpindex/synth"
	"github.com/jitprof/jitprof/internal/perfprof"
	"github.com/jitprof/jitprof/jitdump"
)

// The synthetic recording's code: V8's outer, TurboFan code with inner
// inlined into it at [0x10, 0x20) (jitprof infers it from source
// positions); noline and a function with no name, V8 code with no
// DEBUG_INFO; root, with mid inlined into it at [0x10, 0x30) and other at
// [0x30, 0x38) by inline records; and anonymous memory no dump describes. Every instruction is a one-byte nop.
const (
	synthPid  = 1<<22 + 3 // beyond pid_max: no live process's perf map answers
	script    = "/p/x.js"
	outerAddr = 0x10001000
	innerAddr = 0x10002000
	nolineAdr = 0x10003000
	rootAddr  = 0x10004000
	anonFnAdr = 0x10005000
	anonAddr  = 0x20000000

	outer  = "JS:*outer " + script + ":1:15"
	inner  = "JS:*inner " + script + ":5:15 [inferred]" // as reports name it inlined into outer
	noline = "JS:*noline " + script + ":30:1"
	anonFn = "JS:* " + script + ":40:1" // a function with no name, as V8 names it
)

// synthSamples are the recording's samples: so many at each address.
var synthSamples = map[uint64]int{
	outerAddr: 2, outerAddr + 0x10: 3, outerAddr + 0x18: 1, outerAddr + 0x20: 1,
	nolineAdr + 4: 2,
	anonFnAdr:     1,
	rootAddr:      1, rootAddr + 0x14: 2, rootAddr + 0x32: 1,
	anonAddr + 8: 1,
}

// synthProfile writes the recording with the project's writers and returns
// the profile jitprof makes of it.
func synthProfile(t *testing.T) *contract.Profile {
	t.Helper()
	dir := t.TempDir()
	dump := filepath.Join(dir, fmt.Sprintf("jit-%d.dump", synthPid))
	rec := synth.NewRecording()
	rec.Comm(synthPid, synthPid, "vm")
	rec.Marker(synthPid, dump)
	rec.Map(synthPid, anonAddr, 0x1000, "//anon")
	err := synth.WriteDump(dump, synthPid, func(w *jitdump.Writer) error {
		pos := func(addr uint64, line, col uint32) jitdump.DebugEntry {
			return jitdump.DebugEntry{Addr: addr + jitdump.V8LineBias, Line: line, Discrim: col, File: script}
		}
		nops := func(n int) []byte { return bytes.Repeat([]byte{0x90}, n) }
		load := func(fn *jitdump.Function) uint64 {
			index, err := w.Load(fn)
			if err != nil {
				t.Fatal(err)
			}
			return index
		}
		// inner's own unoptimized code tells where its source ends (8:1).
		load(&jitdump.Function{Name: "JS:^inner " + script + ":5:15", Addr: innerAddr, Code: nops(0x10),
			Lines: []jitdump.DebugEntry{pos(innerAddr, 6, 3), pos(innerAddr+1, 8, 1)}})
		load(&jitdump.Function{Name: outer, Addr: outerAddr, Code: nops(0x40),
			Lines: []jitdump.DebugEntry{pos(outerAddr, 2, 3), pos(outerAddr+0x10, 6, 5), pos(outerAddr+0x18, 7, 5), pos(outerAddr+0x20, 9, 1)}})
		load(&jitdump.Function{Name: noline, Addr: nolineAdr, Code: nops(0x10)})
		load(&jitdump.Function{Name: anonFn, Addr: anonFnAdr, Code: nops(0x10)})
		root := load(&jitdump.Function{Name: "root", Addr: rootAddr, Code: nops(0x40),
			Lines: []jitdump.DebugEntry{{Addr: rootAddr, Line: 10, File: "root.src"}, {Addr: rootAddr + 0x30, Line: 12, File: "root.src"}}})
		for _, in := range []*jitdump.InlineInfo{
			{CodeAddr: rootAddr + 0x10, CodeSize: 0x20, MethodID: 2, Name: "mid", File: "mid.src",
				Lines: []jitdump.InlineLine{{Addr: rootAddr + 0x10, Line: 20}, {Addr: rootAddr + 0x14, Line: 21}}},
			{CodeAddr: rootAddr + 0x30, CodeSize: 0x8, MethodID: 3, Name: "other", File: "other.src",
				Lines: []jitdump.InlineLine{{Addr: rootAddr + 0x30, Line: 40}}},
		} {
			in.Timestamp, in.CodeIndex, in.ParentID, in.RootID = jitdump.Now(), root, 1, 1
			if err := w.WriteRecord(in); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	rec.Now = jitdump.Now() // the samples after the code's load
	for _, addr := range slices.Sorted(maps.Keys(synthSamples)) {
		for range synthSamples[addr] {
			rec.Sample(synthPid, addr)
		}
	}
	data := filepath.Join(dir, "perf.data")
	if err := rec.Write(data); err != nil {
		t.Fatal(err)
	}
	res, err := perfprof.Run(perfprof.Options{Input: data})
	if err != nil {
		t.Fatal(err)
	}
	return res.Profile
}

// An annotated instruction: "> 42.86  3  10001010  nop  x.js:6  JS:*inner [inferred]".
// Columns are two spaces or more apart; an instruction holds single ones.
var rowRE = regexp.MustCompile(`^(>)?\s*(?:([0-9.]+)\s+(\d+)\s+)?([0-9a-f]{6,})  +(.+?)(?:  +(\S+:\d+(?: \(start\))?))?(?:  +(\S.*))?$`)

// A sampled address of code that cannot be shown: "  100.00  1  20000008".
var addrRE = regexp.MustCompile(`^\s*[0-9.]+\s+(\d+)\s+([0-9a-f]+)$`)

// row is an annotated instruction, or a sampled address.
type row struct {
	marked  bool
	samples int
	addr    uint64
	source  string // "file:line", " (start)" after it when so marked
	inlined string
}

// section is the annotation of one instance: its header, its rows.
type section struct {
	header string
	notes  []string // the lines between the header and the table
	rows   []row
}

// parse reads Write's output: sections of a header, notes, a blank line,
// the table with its columns' names first, and a blank line between them.
func parse(t *testing.T, out string) []section {
	t.Helper()
	var secs []section
	paragraphs := strings.Split(strings.TrimSpace(out), "\n\n")
	if len(paragraphs)%2 != 0 {
		t.Fatalf("not headers and tables:\n%s", out)
	}
	for i := 0; i < len(paragraphs); i += 2 {
		lines := strings.Split(paragraphs[i], "\n")
		sec := section{header: lines[0], notes: lines[1:]}
		for _, l := range strings.Split(paragraphs[i+1], "\n")[1:] {
			if m := addrRE.FindStringSubmatch(l); m != nil {
				addr, _ := strconv.ParseUint(m[2], 16, 64)
				n, _ := strconv.Atoi(m[1])
				sec.rows = append(sec.rows, row{samples: n, addr: addr})
				continue
			}
			m := rowRE.FindStringSubmatch(l)
			if m == nil {
				t.Fatalf("not an annotated instruction: %q\n%s", l, out)
			}
			addr, _ := strconv.ParseUint(m[4], 16, 64)
			n, _ := strconv.Atoi(m[3])
			sec.rows = append(sec.rows, row{marked: m[1] == ">", samples: n, addr: addr, source: m[6], inlined: m[7]})
		}
		secs = append(secs, sec)
	}
	return secs
}

// TestNames: annotate takes every name a report gives a function (perf's,
// pprof's, the runtime's, an inferred frame's with or without its suffix),
// shows an inlined function in the code of what holds it with its own
// instructions marked, and for a name nothing goes by names the closest
// sampled ones and what they were inlined into.
func TestNames(t *testing.T) {
	p := synthProfile(t)
	span := func(start, end uint64) []uint64 {
		var as []uint64
		for a := start; a < end; a++ {
			as = append(as, a)
		}
		return as
	}
	type want struct {
		header  string   // the start of the section's first line
		samples int      // that the rows add up to
		marked  []uint64 // the rows marked as the inlined function's
	}
	outerOwn := want{outer + "  (jit-", 7, nil}
	innerIn := want{inner + " inlined into " + outer + "  (jit-", 4, span(outerAddr+0x10, outerAddr+0x20)}
	midIn := want{"mid inlined into root  (jit-", 2, span(rootAddr+0x10, rootAddr+0x30)}
	tests := []struct {
		name   string
		symbol string
		want   []want
		err    []string // in the error, when it fails
	}{
		{"perf's name", outer, []want{outerOwn}, nil},
		{"pprof's name", "JS:*outer", []want{outerOwn}, nil},
		{"an inferred frame, as reports name it", inner, []want{innerIn}, nil},
		{"an inferred frame without its suffix", strings.TrimSuffix(inner, contract.InferredSuffix), []want{innerIn}, nil},
		{"an inferred frame, as pprof names it", "JS:*inner [inferred]", []want{innerIn}, nil},
		{"an inlined frame the dump records", "mid", []want{midIn}, nil},
		{"the function mid is inlined into", "root", []want{{"root  (jit-", 4, nil}}, nil},
		{"code with no line", noline, []want{{noline + "  (jit-", 2, nil}}, nil},
		{"a function with no name, as perf names it", anonFn, []want{{anonFn + "  (jit-", 1, nil}}, nil},
		{"a function with no name, as pprof names it", "JS:*(anonymous) x.js:40:1", []want{{anonFn + "  (jit-", 1, nil}}, nil},
		{"unnamed code", Unknown, []want{{Unknown + "  ([unknown], 1 ", 1, nil}}, nil},
		{"unnamed code of another module", Unknown + " (libc.so.6)", nil, []string{`no sample landed in a function named "[unknown] (libc.so.6)"`}},
		{"a bare V8 name", "inner", nil, []string{`"` + inner + `" (inlined into ` + outer + `)`}},
		{"a misspelt name", "JS:*outr " + script + ":1:15", nil, []string{`closest sampled names: "` + outer + `"`}},
		{"another tier", "JS:^inner " + script + ":5:15 [inferred]", nil, []string{`"` + inner + `" (inlined into ` + outer + `)`}},
		{"nothing near", "zzzzzz", nil, []string{`no sample landed in a function named "zzzzzz" (annotate takes a name jitprof report prints)`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			err := Write(&out, p, tc.symbol, Options{Syntax: disasm.GNU})
			if tc.err != nil {
				if err == nil {
					t.Fatalf("no error; output:\n%s", out.String())
				}
				for _, s := range tc.err {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("error %q lacks %q", err, s)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			secs := parse(t, out.String())
			if len(secs) != len(tc.want) {
				t.Fatalf("%d sections, want %d:\n%s", len(secs), len(tc.want), out.String())
			}
			for i, w := range tc.want {
				sec := secs[i]
				if !strings.HasPrefix(sec.header, w.header) {
					t.Errorf("header %q, want it to start %q", sec.header, w.header)
				}
				n := 0
				var marked []uint64
				for _, r := range sec.rows {
					n += r.samples
					if r.marked {
						marked = append(marked, r.addr)
					}
				}
				if n != w.samples {
					t.Errorf("%d samples in the rows, want %d:\n%s", n, w.samples, out.String())
				}
				if !slices.Equal(marked, w.marked) {
					t.Errorf("rows marked %#x, want %#x:\n%s", marked, w.marked, out.String())
				}
			}
		})
	}
}

// TestSourceIsPprofs: every annotated instruction of jitted code has the
// line pprof -lines gives its address (the innermost of its location's
// lines), every sampled address its samples, and the inlined function's
// name beside it where it has one.
func TestSourceIsPprofs(t *testing.T) {
	p := synthProfile(t)
	type place struct {
		source, inlined string
		samples         int64
	}
	pprof := make(map[uint64]place)
	for _, s := range p.PProf().Sample {
		loc := s.Location[0]
		if len(loc.Line) == 0 {
			continue
		}
		leaf := loc.Line[0]
		pl := pprof[loc.Address]
		pl.source = fmt.Sprintf("%s:%d", filepath.Base(leaf.Function.Filename), leaf.Line)
		if len(loc.Line) > 1 {
			pl.inlined = leaf.Function.Name
		}
		pl.samples += s.Value[0]
		pprof[loc.Address] = pl
	}
	for _, tc := range []struct {
		symbol string
		rows   int
		starts int // rows whose source is the function's start
	}{
		{outer, 0x40, 0},
		{noline, 0x10, 0x10},
		{"root", 0x40, 0},
	} {
		var out bytes.Buffer
		if err := Write(&out, p, tc.symbol, Options{Syntax: disasm.GNU}); err != nil {
			t.Fatal(err)
		}
		secs := parse(t, out.String())
		if len(secs) != 1 || len(secs[0].rows) != tc.rows {
			t.Fatalf("%s: want one section of %d rows:\n%s", tc.symbol, tc.rows, out.String())
		}
		starts := 0
		for _, r := range secs[0].rows {
			source, start := strings.CutSuffix(r.source, " (start)")
			if start {
				starts++
			}
			if source == "" {
				t.Errorf("%s %#x: no source", tc.symbol, r.addr)
			}
			want, sampled := pprof[r.addr]
			if !sampled {
				continue
			}
			if source != want.source || r.inlined != want.inlined || int64(r.samples) != want.samples {
				t.Errorf("%s %#x: source %q, inlined %q, %d samples; pprof: %q, %q, %d", tc.symbol, r.addr, source, r.inlined, r.samples, want.source, want.inlined, want.samples)
			}
		}
		if starts != tc.starts {
			t.Errorf("%s: %d rows marked (start), want %d:\n%s", tc.symbol, starts, tc.starts, out.String())
		}
		if tc.starts > 0 && !strings.Contains(out.String(), "where "+tc.symbol+" starts") {
			t.Errorf("%s: no word of what (start) means:\n%s", tc.symbol, out.String())
		}
	}
}

// TestHandMade: profiles perfprof would not make, written by hand as pprof
// profiles (IDs that are not places, a location with lines and no
// mapping, a sample with no stack, an inlined frame whose holder line has
// no function), give an annotation or an error, never a panic. The code is
// a perf map's, which holds none: the sampled addresses are listed.
func TestHandMade(t *testing.T) {
	perfMap := filepath.Join(t.TempDir(), "perf-7.map")
	if err := os.WriteFile(perfMap, []byte("1000 40 holder\n1040 40 other\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	m := &profile.Mapping{ID: 5, File: perfMap, Start: 0x1000, Limit: 0x2000}
	holder := &profile.Function{ID: 9, Name: "holder", SystemName: "holder"}
	small := &profile.Function{ID: 2, Name: "small", SystemName: "small"}
	lost := &profile.Function{ID: 7, Name: "lost", SystemName: "lost"}
	inlined := &profile.Location{ID: 4, Mapping: m, Address: 0x1010, Line: []profile.Line{{Function: small}, {Function: holder}}}
	own := &profile.Location{ID: 1, Mapping: m, Address: 0x1020, Line: []profile.Line{{Function: holder}}}
	unmapped := &profile.Location{ID: 3, Address: 0x50, Line: []profile.Line{{Function: lost}}}
	noHolder := &profile.Location{ID: 8, Mapping: m, Address: 0x1050, Line: []profile.Line{{Function: small}, {}}}
	// Unnamed code of two processes that ran the same file, sampled alike:
	// shown in the order of where they were, the lower first, whichever
	// mapping the profile lists first.
	sh1 := &profile.Mapping{ID: 11, File: "/bin/sh", Start: 0x9000, Limit: 0xa000}
	sh2 := &profile.Mapping{ID: 6, File: "/bin/sh", Start: 0x5000, Limit: 0x6000}
	inSh1 := &profile.Location{ID: 12, Mapping: sh1, Address: 0x9008}
	inSh2 := &profile.Location{ID: 13, Mapping: sh2, Address: 0x5008}
	sample := func(v int64, locs ...*profile.Location) *profile.Sample {
		return &profile.Sample{Value: []int64{v}, Location: locs}
	}
	p := contract.FromPProf(&profile.Profile{
		SampleType: []*profile.ValueType{{Type: "samples", Unit: "count"}},
		PeriodType: &profile.ValueType{Type: "cpu-clock", Unit: "nanoseconds"},
		Mapping:    []*profile.Mapping{m, sh1, sh2},
		Function:   []*profile.Function{holder, small, lost},
		Location:   []*profile.Location{inlined, own, unmapped, noHolder, inSh1, inSh2},
		Sample: []*profile.Sample{sample(3, inlined), sample(2, own), sample(1), sample(1, noHolder, own), sample(1, unmapped),
			sample(1, inSh2), sample(1, inSh1)},
	})
	valueless := contract.FromPProf(&profile.Profile{Location: []*profile.Location{own}, Sample: []*profile.Sample{{Location: []*profile.Location{own}}}})
	if err := Write(io.Discard, valueless, "holder", Options{}); err == nil || !strings.Contains(err.Error(), "no values") {
		t.Errorf("samples without values: %v, want an error saying so", err)
	}
	for _, tc := range []struct {
		symbol string
		want   []string // in the output, or in the error when it fails
		fails  bool
	}{
		{"small", []string{
			"small inlined into holder  (perf-7.map, 0x1000-0x1040, 3 cpu-clock samples in its code of 5 in all)",
			"small inlined into   (perf-7.map, 0x1040-0x1080, 1 cpu-clock samples in its code of 1 in all)",
			"  100.00        3  1010\n",
		}, false},
		{"holder", []string{"holder  (perf-7.map, 0x1000-0x1040, 5 cpu-clock samples)", "named by a perf map, which holds no code",
			"   60.00        3  1010\n   40.00        2  1020\n"}, false},
		{Unknown, []string{"  100.00        1  5008\n\n[unknown]  (sh, 1 cpu-clock samples)"}, false},
		{"lost", []string{"no function at 0x50: its location has no mapping"}, true},
		{"smal", []string{`the closest sampled names: "small" (inlined into , holder)`}, true},
	} {
		var out bytes.Buffer
		err := Write(&out, p, tc.symbol, Options{Syntax: disasm.GNU})
		got := out.String()
		for range 10 { // the same each time, however maps are walked
			var again bytes.Buffer
			if err := Write(&again, p, tc.symbol, Options{Syntax: disasm.GNU}); err == nil && again.String() != got {
				t.Fatalf("%s: another output:\n%s\nthen\n%s", tc.symbol, got, again.String())
			}
		}
		if tc.fails {
			if err == nil {
				t.Fatalf("%s: no error; output:\n%s", tc.symbol, got)
			}
			got = err.Error()
		} else if err != nil {
			t.Fatalf("%s: %v", tc.symbol, err)
		}
		for _, w := range tc.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s: %q lacks %q", tc.symbol, got, w)
			}
		}
	}
}
