package jitelf

import (
	"bytes"
	"cmp"
	"debug/dwarf"
	"debug/elf"
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	"github.com/jitprof/jitprof/internal/dumpindex"
	"github.com/jitprof/jitprof/internal/fixtures"
)

// functionsOf turns a dump's loads into Functions, as jitprof inject does.
func functionsOf(d *dumpindex.Dump) []Function {
	fns := make([]Function, len(d.Functions))
	for i, f := range d.Functions {
		fns[i] = Function{Name: f.Name, Code: f.Code(), CodeAddr: f.CodeAddr, LineBias: f.LineBias(), Unwind: f.Unwind()}
		if f.Debug() != nil {
			fns[i].Lines = f.Debug().Entries()
		}
	}
	return fns
}

// TestRealDumps writes a packed image of every function of each real
// runtime's dump and checks every symbol, code byte, line entry and FDE,
// then runs the tools on it.
func TestRealDumps(t *testing.T) {
	for _, rt := range fixtures.Runtimes {
		t.Run(string(rt), func(t *testing.T) {
			t.Parallel()
			d, err := dumpindex.Read(fixtures.Dump(t, rt))
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			img := writeImage(t, OptionsFor(d.Header), functionsOf(d))
			f, err := elf.NewFile(bytes.NewReader(img.data))
			if err != nil {
				t.Fatal(err)
			}
			checkHeaders(t, f, img)
			checkSymbols(t, f, img)
			checkBuildID(t, f, img)

			rows := make([][]wantRow, len(d.Functions))
			entries, kept := 0, 0
			for i, fn := range d.Functions {
				rows[i] = expectedRows(d.Functions[i], img.fns[i].LineBias)
				kept += len(rows[i])
				if fn.Debug() != nil {
					entries += int(fn.Debug().NumEntries)
				}
			}
			if entries-kept != img.lay.DroppedLines {
				t.Errorf("%d entries, %d expected rows, but %d dropped", entries, kept, img.lay.DroppedLines)
			}
			if kept > 0 {
				checkRealLines(t, f, img, rows)
			}

			var fdes []uint64
			for i, fn := range d.Functions {
				if fn.Unwind() != nil && len(fn.Unwind().EHFrame) > 0 {
					fdes = append(fdes, img.lay.Offsets[i]) // every real FDE covers its whole function
				}
			}
			if len(fdes) > 0 {
				checkEHFrame(t, f, img, fdes)
			}
			if img.lay.DroppedFDEs != 0 {
				t.Errorf("%d FDEs dropped", img.lay.DroppedFDEs)
			}
			t.Logf("%d functions, %d line entries of which %d kept, %d FDEs; %d bytes", len(img.fns), entries, kept, len(fdes), len(img.data))

			if f.Machine != hostOpts.Machine || f.Class != hostOpts.Class {
				return
			}
			path := img.save(t)
			checkReadelf(t, path, kept > 0, len(fdes) > 0)
			checkObjdump(t, path, img)
			if kept > 0 {
				// Every function's rows would make tens of thousands of
				// lookups; some functions of each part of the image do.
				step := max(1, len(img.fns)/200)
				checkAddr2line(t, path, img, func(_ *image, i int) []wantRow {
					if i%step != 0 {
						return nil
					}
					return rows[i]
				})
			}
		})
	}
}

// expectedRows is an independent statement of the rule for entries outside
// their function: of those before it, the last moves to its start unless
// an entry is there already; those at or past its end go.
func expectedRows(fn *dumpindex.Code, bias uint64) []wantRow {
	if fn.Debug() == nil {
		return nil
	}
	var all []wantRow
	var offs []int64
	for e := range fn.Debug().Entries() {
		file := e.File
		if file == "" {
			file = unknownFile
		}
		all = append(all, wantRow{line: int(e.Line), col: int(e.Discrim), file: file})
		offs = append(offs, int64(e.Addr-bias-fn.CodeAddr))
	}
	idx := make([]int, len(all))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int { return cmp.Compare(offs[a], offs[b]) })
	size := int64(len(fn.Code()))
	before := -1
	var rows []wantRow
	for _, i := range idx {
		switch {
		case offs[i] < 0:
			before = i
		case offs[i] < size:
			r := all[i]
			r.off = uint64(offs[i])
			rows = append(rows, r)
		}
	}
	if before >= 0 && size > 0 && (len(rows) == 0 || rows[0].off > 0) {
		rows = append([]wantRow{all[before]}, rows...)
	}
	for k := range rows {
		rows[k].superseded = k+1 < len(rows) && rows[k+1].off == rows[k].off
	}
	return rows
}

// checkRealLines checks that debug/dwarf finds every expected row, in
// order, and nothing else.
func checkRealLines(t *testing.T, f *elf.File, img *image, rows [][]wantRow) {
	t.Helper()
	d, err := f.DWARF()
	if err != nil {
		t.Fatalf("debug/dwarf: %v", err)
	}
	cu, err := d.Reader().Next()
	if err != nil || cu == nil || cu.Tag != dwarf.TagCompileUnit {
		t.Fatalf("no compile unit: %v", err)
	}
	got, _ := readRows(t, d, cu)
	var want []lineRow
	for i, rs := range rows {
		for _, r := range rs {
			want = append(want, lineRow{img.lay.Offsets[i] + r.off, r.file, r.line, r.col})
		}
	}
	if len(got) != len(want) {
		t.Errorf("%d rows, want %d", len(got), len(want))
	}
	for k := range min(len(got), len(want)) {
		if got[k] != want[k] {
			t.Fatalf("row %d: %v, want %v", k, got[k], want[k])
		}
	}
}

// TestLikePerf checks single images against those perf inject writes for
// the same CODE_LOADs of a real CPython run, whose unwinding data is real:
// the same code, symbol and unwinding tables, byte for byte, for this
// package's layout is perf's.
func TestLikePerf(t *testing.T) {
	rec := fixtures.Record(t, fixtures.Python)
	fixtures.Inject(t, rec)
	d, err := dumpindex.Read(rec.Dumps[0])
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	fns := functionsOf(d)
	compared := 0
	for i, fn := range d.Functions {
		perf, err := elf.Open(imagePath(rec, d, i))
		if err != nil {
			t.Fatal(err)
		}
		img := writeImage(t, OptionsFor(d.Header), fns[i:i+1])
		ours, err := elf.NewFile(bytes.NewReader(img.data))
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{".text", ".eh_frame", ".eh_frame_hdr"} {
			p, o := perf.Section(name), ours.Section(name)
			if (p == nil) != (o == nil) {
				t.Fatalf("%s: %s in perf's image: %v, in ours: %v", fn.Name, name, p != nil, o != nil)
			}
			if p == nil {
				continue
			}
			pd, _ := p.Data()
			od, _ := o.Data()
			if !bytes.Equal(pd, od) {
				t.Errorf("%s: %s differs:\nperf % x\nours % x", fn.Name, name, pd, od)
			}
			if name != ".text" && p.Addr-perf.Section(".text").Addr != o.Addr-ours.Section(".text").Addr {
				t.Errorf("%s: %s is %#x after the text in perf's image, %#x in ours", fn.Name, name,
					p.Addr-perf.Section(".text").Addr, o.Addr-ours.Section(".text").Addr)
			}
		}
		ps, _ := perf.Symbols()
		us, _ := ours.Symbols()
		if len(ps) != 1 || len(us) != 1 || ps[0].Name != us[0].Name || ps[0].Size != us[0].Size {
			t.Errorf("symbols: perf %v, ours %v", ps, us)
		}
		perf.Close()
		compared++
	}
	t.Logf("%d images compared", compared)
}

// imagePath is where perf inject put the image of d's i-th function.
func imagePath(rec fixtures.Recording, d *dumpindex.Dump, i int) string {
	return filepath.Join(filepath.Dir(rec.Dumps[0]), fmt.Sprintf("jitted-%d-%d.so", d.Header.Pid, d.Functions[i].CodeIndex))
}
