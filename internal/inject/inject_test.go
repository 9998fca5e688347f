package inject_test

import (
	"bytes"
	"crypto/sha256"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jitprof/jitprof/internal/fixtures"
	"github.com/jitprof/jitprof/internal/inject"
	"github.com/jitprof/jitprof/internal/jitsources"
	"github.com/jitprof/jitprof/jitdump"
	"github.com/jitprof/jitprof/perfdata"
)

// jitSamples counts the samples perf put on functions the dumps name.
func jitSamples(t testing.TB, counts map[string]int, dumps []string) int {
	t.Helper()
	names := fixtures.JITNames(t, dumps)
	n := 0
	for s, c := range counts {
		if names[s] {
			n += c
		}
	}
	return n
}

func run(t testing.TB, opts inject.Options) (inject.Result, []error) {
	t.Helper()
	var warnings []error
	opts.Warn = func(err error) { warnings = append(warnings, err) }
	res, err := inject.Run(opts)
	if err != nil {
		t.Fatalf("inject: %v", err)
	}
	return res, warnings
}

// TestSameAttributionAsPerf: perf report gives the same per-symbol counts
// on jitprof's output as on perf inject's, self and with call chains.
func TestSameAttributionAsPerf(t *testing.T) {
	for _, rt := range []fixtures.Runtime{fixtures.Node, fixtures.Erlang, fixtures.PHP, fixtures.LLVM, fixtures.Python} {
		for _, callgraph := range []bool{false, true} {
			name := string(rt)
			var perfArgs, reportArgs []string
			if callgraph {
				name += "/-g"
				perfArgs, reportArgs = []string{"-g"}, []string{"--children", "-g", "none"}
			} else {
				reportArgs = []string{"-g", "none"}
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				rec := fixtures.Record(t, rt, perfArgs...)
				theirs := fixtures.Inject(t, rec)
				ours := filepath.Join(t.TempDir(), "perf.jit.data")
				res, warnings := run(t, inject.Options{Input: rec.PerfData, Output: ours, Pack: true})
				if len(warnings) > 0 {
					t.Errorf("warnings: %v", warnings)
				}
				if res.Dumps != 1 || res.Images != 1 || res.Functions == 0 {
					t.Errorf("result %+v", res)
				}
				want, total := fixtures.SymbolCounts(t, theirs, reportArgs...)
				got, _ := fixtures.SymbolCounts(t, ours, reportArgs...)
				d := fixtures.Differ(want, got)
				t.Logf("%d samples, %d in jitted code, %d attributed differently", total, jitSamples(t, want, rec.Dumps), d)
				if jitSamples(t, got, rec.Dumps) == 0 {
					t.Errorf("no samples in jitted functions")
				}
				if float64(d) > 0.005*float64(total) {
					t.Errorf("%d of %d samples attributed differently from perf inject", d, total)
					for s, n := range want {
						if got[s] != n {
							t.Logf("  %q: perf %d, jitprof %d", s, n, got[s])
						}
					}
				}
			})
		}
	}
}

// One image per function, as perf writes them, gives the same report as one
// image per dump.
func TestUnpackedEqualsPacked(t *testing.T) {
	rec := fixtures.Record(t, fixtures.Node)
	dir := t.TempDir()
	packed, unpacked := filepath.Join(dir, "packed.data"), filepath.Join(dir, "unpacked.data")
	run(t, inject.Options{Input: rec.PerfData, Output: packed, Pack: true})
	res, _ := run(t, inject.Options{Input: rec.PerfData, Output: unpacked})
	if res.Images != res.Functions {
		t.Errorf("unpacked: %d images for %d functions", res.Images, res.Functions)
	}
	a, total := fixtures.SymbolCounts(t, packed, "-g", "none")
	b, _ := fixtures.SymbolCounts(t, unpacked, "-g", "none")
	if d := fixtures.Differ(a, b); d != 0 {
		t.Errorf("%d of %d samples differ between packed and unpacked images", d, total)
	}
}

func digest(t testing.TB, path string) [32]byte {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return sha256.Sum256(data)
}

func TestMovedAndMissingDumps(t *testing.T) {
	rec := fixtures.Record(t, fixtures.Node)
	before := digest(t, rec.PerfData)
	moved := t.TempDir()
	dump := rec.Dumps[0]
	if err := os.Rename(dump, filepath.Join(moved, filepath.Base(dump))); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "out.data")

	res, warnings := run(t, inject.Options{Input: rec.PerfData, Output: out, Pack: true})
	if res.Dumps != 0 || len(warnings) != 1 || !strings.Contains(warnings[0].Error(), dump) || !strings.Contains(warnings[0].Error(), "--jitdump-dir") {
		t.Fatalf("missing dump: result %+v, warnings %v", res, warnings)
	}
	dumps := []string{filepath.Join(moved, filepath.Base(dump))}
	if counts, _ := fixtures.SymbolCounts(t, out, "-g", "none"); jitSamples(t, counts, dumps) != 0 {
		t.Errorf("symbols of a dump that was not found")
	}

	res, warnings = run(t, inject.Options{Input: rec.PerfData, Output: out, Pack: true, DumpDirs: []string{t.TempDir(), moved}})
	if res.Dumps != 1 || len(warnings) != 0 {
		t.Fatalf("dump in --jitdump-dir: result %+v, warnings %v", res, warnings)
	}
	if counts, _ := fixtures.SymbolCounts(t, out, "-g", "none"); jitSamples(t, counts, dumps) == 0 {
		t.Errorf("no JS symbols with the dump found in --jitdump-dir")
	}
	if digest(t, rec.PerfData) != before {
		t.Errorf("inject changed its input")
	}
}

func TestRefusesRecordingWithoutMonotonicClock(t *testing.T) {
	perf, err := exec.LookPath("perf")
	if err != nil {
		t.Skip("perf is not installed")
	}
	dir := t.TempDir()
	data := filepath.Join(dir, "perf.data")
	cmd := exec.Command(perf, "record", "-q", "--no-bpf-event", "-o", data, "--", "node", "--perf-prof", fixtures.Workload(t, "newfunctions.js"), "5")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("perf record: %v\n%s", err, out)
	}
	out := filepath.Join(dir, "out.data")
	_, err = inject.Run(inject.Options{Input: data, Output: out, Pack: true})
	if !errors.Is(err, jitsources.ErrNoClock) || !strings.Contains(err.Error(), "-k mono") {
		t.Fatalf("err = %v, want one saying how to record", err)
	}
	if _, err := os.Stat(out); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("an output was written: %v", err)
	}
}

func fileSize(t testing.TB, path string) int64 {
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}

// dirUsage counts the files and bytes under dir.
func dirUsage(t testing.TB, dir string) (files int, size int64) {
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			info, _ := d.Info()
			files++
			size += info.Size()
		}
		return nil
	})
	return files, size
}

// TestFasterAndSmallerThanPerf measures both tools side by side on
// recordings with many functions: time, and what each writes (perf with
// --buildid-dir in a directory of the test's, so its cache copies count
// there and not in ~/.debug).
func TestFasterAndSmallerThanPerf(t *testing.T) {
	if testing.Short() {
		t.Skip("records node and Erlang with thousands of functions")
	}
	for _, tc := range []struct {
		rt       fixtures.Runtime
		minLoads int
	}{{fixtures.NodeMany, 5000}, {fixtures.Erlang, 15000}} {
		t.Run(string(tc.rt), func(t *testing.T) {
			rec := fixtures.Record(t, tc.rt)
			dumpDir := filepath.Dir(rec.Dumps[0])
			filesBefore, _ := dirUsage(t, dumpDir)

			perfOut, cache := filepath.Join(t.TempDir(), "perf.jit.data"), t.TempDir()
			start := time.Now()
			if out, err := exec.Command("perf", "--buildid-dir", cache, "inject", "--jit", "-i", rec.PerfData, "-o", perfOut).CombinedOutput(); err != nil {
				t.Fatalf("perf inject: %v\n%s", err, out)
			}
			perfTime := time.Since(start)
			// What each tool writes besides the output recording, which
			// both must write and which is about the input's size: perf's
			// images next to the dump and its cache copies; jitprof's images.
			cacheFiles, cacheBytes := dirUsage(t, cache)
			imgFiles, imgBytes := dirUsage(t, dumpDir)
			perfFiles, perfBytes := cacheFiles+imgFiles-filesBefore, cacheBytes+imgBytes
			perfOutSize := fileSize(t, perfOut)

			ourOut := filepath.Join(t.TempDir(), "perf.jit.data")
			start = time.Now()
			res, _ := run(t, inject.Options{Input: rec.PerfData, Output: ourOut, Pack: true})
			ourTime := time.Since(start)
			ourFiles, ourBytes := dirUsage(t, ourOut+".jit")
			ourOutSize := fileSize(t, ourOut)

			t.Logf("%d functions: perf inject %v, %d files, %d bytes of images and cache (+%d output); jitprof inject %v, %d files, %d bytes of images (+%d output): %.0fx faster, %.1fx fewer bytes (%.1fx with the outputs)",
				res.Functions, perfTime, perfFiles, perfBytes, perfOutSize, ourTime, ourFiles, ourBytes, ourOutSize,
				float64(perfTime)/float64(ourTime), float64(perfBytes)/float64(ourBytes), float64(perfBytes+perfOutSize)/float64(ourBytes+ourOutSize))
			if res.Functions < tc.minLoads {
				t.Fatalf("only %d functions; the comparison wants at least %d", res.Functions, tc.minLoads)
			}
			if perfTime < 5*ourTime {
				t.Errorf("jitprof inject took %v, perf inject %v: less than 5x faster", ourTime, perfTime)
			}
			if perfFiles < 10*ourFiles || perfBytes < 10*ourBytes {
				t.Errorf("jitprof wrote %d files and %d bytes of images, perf %d and %d: not 10x fewer", ourFiles, ourBytes, perfFiles, perfBytes)
			}
			// The reports agree here too.
			a, total := fixtures.SymbolCounts(t, perfOut, "-g", "none")
			b, _ := fixtures.SymbolCounts(t, ourOut, "-g", "none")
			if d := fixtures.Differ(a, b); float64(d) > 0.005*float64(total) {
				t.Errorf("%d of %d samples attributed differently", d, total)
			}
		})
	}
}

// perf annotate shows a jitted function's instructions, with its source
// lines where the dump has them (LLVM writes DEBUG_INFO).
func TestAnnotateWithSourceLines(t *testing.T) {
	rec := fixtures.Record(t, fixtures.LLVM)
	out := filepath.Join(t.TempDir(), "out.data")
	run(t, inject.Options{Input: rec.PerfData, Output: out, Pack: true})
	ann := string(fixtures.Perf(t, "annotate", "-i", out, "--stdio", "-l", "fib"))
	fib := fmt.Sprintf("fib_sq.c:%d", fixtures.WorkloadLine(t, "fib_sq.c", "static long fib(long n)"))
	for _, want := range []string{"<fib>:", "push", "ret", fib, "static long fib(long n)"} {
		if !strings.Contains(ann, want) {
			t.Errorf("perf annotate lacks %q:\n%s", want, ann)
		}
	}
}

// A JIT that moves a function and gives a freed function's place to a new
// one (examples/minijit): every sample is placed exactly as perf inject
// places it.
func TestMovingJITSamePlacementAsPerf(t *testing.T) {
	data, _ := fixtures.RecordTestJIT(t, 2000, "0.8s")
	theirs := filepath.Join(t.TempDir(), "perf.jit.data")
	fixtures.Perf(t, "inject", "--jit", "-i", data, "-o", theirs)
	ours := filepath.Join(t.TempDir(), "out.data")
	res, _ := run(t, inject.Options{Input: data, Output: ours, Pack: true})
	if res.Events <= res.Functions {
		t.Errorf("%d events for %d functions: the move is missing", res.Events, res.Functions)
	}
	script := func(path string) []string {
		var jitted []string
		for line := range strings.Lines(string(fixtures.Perf(t, "script", "-i", path, "--ns", "-F", "time,ip,sym"))) {
			if strings.Contains(line, "jit:") {
				jitted = append(jitted, line)
			}
		}
		return jitted
	}
	want, got := script(theirs), script(ours)
	if len(want) == 0 {
		t.Fatal("perf placed no sample in jitted code")
	}
	if strings.Join(want, "") != strings.Join(got, "") {
		t.Errorf("samples placed differently: perf %d jitted samples, jitprof %d", len(want), len(got))
	}
}

// A dump of another architecture and byte order injects as well as the
// original: perf reads the symbols of an arm64 big-endian image too.
func TestForeignDump(t *testing.T) {
	rec := fixtures.Record(t, fixtures.Node)
	native := filepath.Join(t.TempDir(), "native.data")
	run(t, inject.Options{Input: rec.PerfData, Output: native, Pack: true})

	f, err := jitdump.Open(rec.Dumps[0])
	if err != nil {
		t.Fatal(err)
	}
	h := f.Header()
	h.ByteOrder, h.ElfMach = binary.BigEndian, uint32(elf.EM_AARCH64)
	var b bytes.Buffer
	w, err := jitdump.NewWriter(&b, h)
	if err != nil {
		t.Fatal(err)
	}
	for rec, err := f.Next(); err == nil; rec, err = f.Next() {
		if err := w.WriteRecord(rec); err != nil {
			t.Fatal(err)
		}
	}
	w.Flush()
	f.Close()
	if err := os.WriteFile(rec.Dumps[0], b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}

	foreign := filepath.Join(t.TempDir(), "foreign.data")
	run(t, inject.Options{Input: rec.PerfData, Output: foreign, Pack: true})
	img, err := elf.Open(foreign + ".jit/" + fmt.Sprintf("jitprof-%d.so", h.Pid))
	if err != nil {
		t.Fatal(err)
	}
	if img.Machine != elf.EM_AARCH64 || img.ByteOrder != binary.BigEndian {
		t.Errorf("image is %v %v, want the dump's arm64 big-endian", img.Machine, img.ByteOrder)
	}
	img.Close()
	a, total := fixtures.SymbolCounts(t, native, "-g", "none")
	c, _ := fixtures.SymbolCounts(t, foreign, "-g", "none")
	if d := fixtures.Differ(a, c); d != 0 {
		t.Errorf("%d of %d samples attributed differently with the foreign dump", d, total)
	}
}

// A recording cut short gives an error naming it and an offset, and no
// output at all.
func TestTruncatedRecording(t *testing.T) {
	rec := fixtures.Record(t, fixtures.Node)
	data, err := os.ReadFile(rec.PerfData)
	if err != nil {
		t.Fatal(err)
	}
	cut := filepath.Join(t.TempDir(), "cut.data")
	if err := os.WriteFile(cut, data[:len(data)*2/3], 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "out.data")
	_, err = inject.Run(inject.Options{Input: cut, Output: out, Pack: true})
	if err == nil || !strings.Contains(err.Error(), cut) || !strings.Contains(err.Error(), "offset") {
		t.Fatalf("err = %v, want one naming %s and an offset", err, cut)
	}
	if _, err := os.Stat(out); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a partial output exists: %v", err)
	}
}

// An anonymous mapping made after the marker but written earlier in the file
// (the thread moved to a CPU whose ring buffer perf read first) is dropped
// as perf inject drops it, by time. LLVM's MCJIT makes its code executable
// after writing CODE_LOAD; kept, that mapping hides every function.
func TestLateAnonymousMappingEarlierInFile(t *testing.T) {
	rec := fixtures.Record(t, fixtures.LLVM)
	in, err := perfdata.Open(rec.PerfData)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	// The runtime's anonymous mappings made after its marker, wherever
	// they are in the file: about one run in ten, perf wrote them before
	// it already.
	markerAt, markerTime := int64(-1), uint64(0)
	type anon struct {
		time uint64
		at   int64
		raw  []byte
	}
	var anons []anon
	for raw, err := in.NextRaw(); err == nil; raw, err = in.NextRaw() {
		m, ok := in.Decode(raw).(*perfdata.Mmap2)
		switch {
		case !ok || m.Pid != uint32(rec.Pid):
		case strings.HasSuffix(m.Filename, fmt.Sprintf("jit-%d.dump", rec.Pid)):
			markerAt, markerTime = raw.Offset, m.Trailer.Time
		case m.Filename == "//anon":
			anons = append(anons, anon{m.Trailer.Time, raw.Offset, bytes.Clone(raw.Bytes)})
		}
	}
	var late [][]byte
	lateAt := map[int64]bool{}
	for _, a := range anons {
		if a.time > markerTime {
			late = append(late, a.raw)
			lateAt[a.at] = true
		}
	}
	if markerAt < 0 || len(late) == 0 {
		t.Fatalf("lli left no marker or no anonymous mapping after it (marker at %d, %d mappings)", markerAt, len(late))
	}

	in, err = perfdata.Open(rec.PerfData)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	swapped := filepath.Join(t.TempDir(), "swapped.data")
	w, err := perfdata.Create(swapped, in.Options())
	if err != nil {
		t.Fatal(err)
	}
	err = w.Copy(in.Reader, func(raw perfdata.RawRecord) (bool, error) {
		if raw.Offset == markerAt {
			for _, b := range late {
				if err := w.WriteRaw(b); err != nil {
					return false, err
				}
			}
		}
		return !lateAt[raw.Offset], nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}

	theirs := filepath.Join(t.TempDir(), "perf.jit.data")
	fixtures.Perf(t, "inject", "--jit", "-i", swapped, "-o", theirs)
	ours := filepath.Join(t.TempDir(), "ours.data")
	run(t, inject.Options{Input: swapped, Output: ours, Pack: true})
	want, total := fixtures.SymbolCounts(t, theirs, "-g", "none")
	got, _ := fixtures.SymbolCounts(t, ours, "-g", "none")
	if jitSamples(t, want, rec.Dumps) == 0 {
		t.Fatal("perf inject put no sample in jitted code")
	}
	if d := fixtures.Differ(want, got); d != 0 {
		t.Errorf("%d of %d samples attributed differently from perf inject", d, total)
	}
}
