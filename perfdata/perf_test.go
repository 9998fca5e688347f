package perfdata_test

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/jitprof/jitprof/internal/fixtures"
	"github.com/jitprof/jitprof/perfdata"
)

// recording is a way to run perf record on the node workload.
type recording struct {
	name string
	args []string // perf record options
	pipe bool     // perf record -o -, its output saved to a file
	// buildIDs says perf writes a build-id table: not in pipe mode, nor
	// with --buildid-mmap, where the build-ids are in the MMAP2 records.
	buildIDs bool
}

var recordings = []recording{
	{name: "plain", buildIDs: true},
	{name: "callchain", args: []string{"-g"}, buildIDs: true},
	{name: "two-events", args: []string{"-e", "cpu-clock,task-clock", "--sample-cpu"}, buildIDs: true},
	{name: "group-read", args: []string{"-e", "{cpu-clock,task-clock}:S"}, buildIDs: true},
	{name: "buildid-mmap", args: []string{"--buildid-mmap"}},
	{name: "pipe", args: []string{"-g"}, pipe: true},
	// User registers and stack copies, ready for DWARF unwinding.
	{name: "dwarf", args: []string{"--call-graph", "dwarf"}, buildIDs: true},
}

// record runs perf record -k mono as rec says on node running
// newfunctions.js with arg, and returns the perf.data, in a fresh
// t.TempDir.
func record(t testing.TB, rec recording, hz int, arg string) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("node is not installed (CI is set, so nothing may be missing): %v", err)
		}
		t.Skipf("node is not installed: %v", err)
	}
	out := filepath.Join(t.TempDir(), "perf.data")
	args := slices.Concat([]string{"record", "-q", "-k", "mono", "--no-bpf-event", "-F", strconv.Itoa(hz)}, rec.args)
	if rec.pipe {
		args = append(args, "-o", "-")
	} else {
		args = append(args, "-o", out)
	}
	args = append(args, "--", node, fixtures.Workload(t, "newfunctions.js"), arg)
	stdout := fixtures.Perf(t, args...)
	if rec.pipe {
		if err := os.WriteFile(out, stdout, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// TestRecordings holds the reader and writer against real recordings of
// several kinds, and against perf's own reading of them.
func TestRecordings(t *testing.T) {
	for _, rec := range recordings {
		t.Run(rec.name, func(t *testing.T) {
			t.Parallel()
			path := record(t, rec, 10000, "20")
			t.Run("AgainstPerf", func(t *testing.T) { checkAgainstPerf(t, path, rec.pipe) })
			t.Run("Readers", func(t *testing.T) { checkReaders(t, path, rec.pipe) })
			t.Run("RoundTrip", func(t *testing.T) { checkRoundTrip(t, path, rec.pipe) })
			if rec.buildIDs {
				t.Run("BuildIDs", func(t *testing.T) { checkBuildIDs(t, path) })
			}
			if !rec.pipe {
				t.Run("EventDescs", func(t *testing.T) { checkEventDescs(t, path) })
			}
		})
	}
}

// dumped is what perf report -D says of one record.
type dumped struct {
	off    int64 // in the file
	size   int   // the record header's size field
	typ    perfdata.RecordType
	prefix []string // the numbers before the offset: cpu and time, as the sample type has them
	line   string   // after "PERF_RECORD_"
	block  []string // the lines of detail after it ("... FP chain" and so on)
}

var (
	eventLine  = regexp.MustCompile(`^(0|0x[0-9a-f]+)@\S+ \[0x([0-9a-f]+)\]: event: (\d+)$`)
	recordLine = regexp.MustCompile(`^((?:-?\d+ )*)(0|0x[0-9a-f]+) \[0x[0-9a-f]+\]: PERF_RECORD_(.*)$`)
)

// perfDump runs perf report -D on path and returns the records perf lists,
// in the order perf processed them.
func perfDump(t *testing.T, path string, pipe bool) []dumped {
	t.Helper()
	var out []dumped
	cur := -1 // the record whose lines follow
	inBlock := false
	// --no-inline: perf otherwise runs addr2line on every frame it
	// unwinds from a stack copy, minutes for a recording of node.
	sc := bufio.NewScanner(bytes.NewReader(fixtures.Perf(t, "report", "--no-inline", "-D", "-i", path)))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if m := eventLine.FindStringSubmatch(line); m != nil {
			off, _ := strconv.ParseInt(strings.TrimPrefix(m[1], "0x"), 16, 64)
			if pipe {
				off += perfdata.PipeHeaderSize // perf counts from the end of a pipe's header
			}
			size, _ := strconv.ParseInt(m[2], 16, 32)
			typ, _ := strconv.Atoi(m[3])
			out = append(out, dumped{off: off, size: int(size), typ: perfdata.RecordType(typ)})
			cur, inBlock = len(out)-1, false
			continue
		}
		if cur < 0 {
			continue
		}
		if m := recordLine.FindStringSubmatch(line); m != nil {
			out[cur].prefix, out[cur].line, inBlock = strings.Fields(m[1]), m[3], true
			continue
		}
		if inBlock && strings.HasPrefix(line, "...") {
			out[cur].block = append(out[cur].block, line)
		} else {
			inBlock = false
		}
	}
	if len(out) == 0 {
		t.Fatal("perf report -D listed no records")
	}
	return out
}

// chex formats as C's %#x: 0 without a prefix.
func chex(v uint64) string {
	if v == 0 {
		return "0"
	}
	return fmt.Sprintf("%#x", v)
}

// describe renders a record as perf report -D does (perf's
// perf_event__fprintf and dump_sample), for the types this package decodes
// and perf describes; ok is false for others.
func describe(rec perfdata.Record) (line string, block []string, ok bool) {
	prot := func(p, flags uint32) string {
		b := []byte("---p")
		for i, c := range "rwx" {
			if p&(1<<i) != 0 {
				b[i] = byte(c)
			}
		}
		if flags&1 != 0 { // MAP_SHARED
			b[3] = 's'
		}
		return string(b)
	}
	switch r := rec.(type) {
	case *perfdata.Sample:
		line = fmt.Sprintf("SAMPLE(IP, %s): %d/%d: %s period: %d addr: %s", chex(uint64(r.Misc)), int32(r.Pid), int32(r.Tid), chex(r.IP), r.Period, chex(r.Addr))
		st, rf := r.Attr.SampleType, r.Attr.ReadFormat
		if st&perfdata.SampleCallchain != 0 {
			block = append(block, fmt.Sprintf("... FP chain: nr:%d", len(r.Callchain)))
			for i, ip := range r.Callchain {
				block = append(block, fmt.Sprintf("..... %2d: %016x", i, ip))
			}
		}
		if st&perfdata.SampleRegsUser != 0 && r.RegsABI != perfdata.RegsABINone {
			block = append(block, fmt.Sprintf("... user regs: mask %#x ABI %s", r.Attr.SampleRegsUser, [...]string{"none", "32-bit", "64-bit"}[r.RegsABI]))
			for n := range 64 {
				if v, ok := r.UserRegister(n); ok {
					block = append(block, fmt.Sprintf(".... %-5s 0x%016x", regNames[runtime.GOARCH][n], v))
				}
			}
		}
		if st&perfdata.SampleStackUser != 0 {
			// perf gives the offset of the size field in the record.
			off := len(r.Raw) - len(r.Rest) - 8
			if r.StackUserSize > 0 {
				off -= int(r.StackUserSize) + 8
			}
			block = append(block, fmt.Sprintf("... ustack: size %d, offset %#x", len(r.StackUser), off))
		}
		if st&perfdata.SampleRead != 0 {
			block = append(block, "... sample_read:")
			if rf&perfdata.FormatTotalTimeEnabled != 0 {
				block = append(block, fmt.Sprintf("...... time enabled %016x", r.Read.TimeEnabled))
			}
			if rf&perfdata.FormatTotalTimeRunning != 0 {
				block = append(block, fmt.Sprintf("...... time running %016x", r.Read.TimeRunning))
			}
			if rf&perfdata.FormatGroup != 0 {
				block = append(block, fmt.Sprintf(".... group nr %d", len(r.Read.Values)))
			}
			for _, v := range r.Read.Values {
				s := fmt.Sprintf("..... id %016x, value %016x", v.ID, v.Value)
				if rf&perfdata.FormatLost != 0 {
					s += fmt.Sprintf(", lost %d", v.Lost)
				}
				block = append(block, s)
			}
		}
	case *perfdata.Mmap:
		kind := 'x'
		if r.Misc&perfdata.MiscMmapData != 0 {
			kind = 'r'
		}
		line = fmt.Sprintf("MMAP %d/%d: [%s(%s) @ %s]: %c %s", int32(r.Pid), int32(r.Tid), chex(r.Addr), chex(r.Len), chex(r.Pgoff), kind, r.Filename)
	case *perfdata.Mmap2:
		id := fmt.Sprintf("%02x:%02x %d %d", r.Maj, r.Min, r.Ino, r.InoGeneration)
		if r.Misc&perfdata.MiscMmapBuildID != 0 {
			id = "<" + hex.EncodeToString(r.BuildID) + ">"
		}
		line = fmt.Sprintf("MMAP2 %d/%d: [%s(%s) @ %s %s]: %s %s", int32(r.Pid), int32(r.Tid), chex(r.Addr), chex(r.Len), chex(r.Pgoff), id, prot(r.Prot, r.Flags), r.Filename)
	case *perfdata.Comm:
		exec := ""
		if r.Misc&perfdata.MiscCommExec != 0 {
			exec = " exec"
		}
		line = fmt.Sprintf("COMM%s: %s:%d/%d", exec, r.Comm, int32(r.Pid), int32(r.Tid))
	case *perfdata.Task:
		line = fmt.Sprintf("%s(%d:%d):(%d:%d)", r.Type, int32(r.Pid), int32(r.Tid), int32(r.PPid), int32(r.PTid))
	case *perfdata.FinishedRound:
		line = "FINISHED_ROUND"
	default:
		return "", nil, false
	}
	return line, block, true
}

// regNames are perf's names of the user registers, by number, as perf
// report -D prints them.
var regNames = map[string][]string{
	"amd64": {"AX", "BX", "CX", "DX", "SI", "DI", "BP", "SP", "IP", "FLAGS", "CS", "SS", "DS", "ES", "FS", "GS",
		"R8", "R9", "R10", "R11", "R12", "R13", "R14", "R15"},
	"arm64": {"x0", "x1", "x2", "x3", "x4", "x5", "x6", "x7", "x8", "x9", "x10", "x11", "x12", "x13", "x14", "x15",
		"x16", "x17", "x18", "x19", "x20", "x21", "x22", "x23", "x24", "x25", "x26", "x27", "x28", "x29", "lr", "sp", "pc"},
}

// checkAgainstPerf reads the file in file order and in time order and
// holds every record against perf report -D: the same records (offset,
// type, size), each decoded (none *Invalid, the types perf describes
// rendered as perf renders them, the time perf sorts by), the same counts
// per type, and the same processing order.
func checkAgainstPerf(t *testing.T, path string, pipe bool) {
	dump := perfDump(t, path, pipe)
	byOff := make(map[int64]dumped, len(dump))
	perfCounts := map[perfdata.RecordType]int{}
	for _, d := range dump {
		byOff[d.off] = d
		perfCounts[d.typ]++
	}

	f, err := perfdata.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	counts := map[perfdata.RecordType]int{}
	described := 0
	for {
		raw, err := f.NextRaw()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		rec := f.Decode(raw)
		h := rec.Header()
		counts[h.Type]++
		d, ok := byOff[h.Offset]
		if !ok {
			t.Errorf("%#x: %s record perf does not list", h.Offset, h.Type)
			continue
		}
		if size := int(binary.LittleEndian.Uint16(raw.Bytes[6:])); d.typ != h.Type || d.size != size {
			t.Errorf("%#x: %s of size %d, perf says type %d of size %d", h.Offset, h.Type, size, d.typ, d.size)
		}
		if inv, ok := rec.(*perfdata.Invalid); ok {
			t.Errorf("%#x: %v", h.Offset, inv.Err)
			continue
		}
		if h.Type < perfdata.TypeUserStart && len(d.prefix) > 0 {
			time, _ := f.Time(raw)
			if d.prefix[len(d.prefix)-1] != strconv.FormatUint(time, 10) {
				t.Errorf("%#x: %s at time %d, perf says %v", h.Offset, h.Type, time, d.prefix)
			}
		}
		line, block, ok := describe(rec)
		if !ok {
			continue
		}
		described++
		if line != d.line || !slices.Equal(block, d.block) {
			t.Errorf("%#x: decoded as\n%s\n%s\nperf says\n%s\n%s", h.Offset, line, strings.Join(block, "\n"), d.line, strings.Join(d.block, "\n"))
		}
	}
	if fmt.Sprint(counts) != fmt.Sprint(perfCounts) {
		t.Errorf("records per type: %v, perf counts %v", counts, perfCounts)
	}
	if counts[perfdata.TypeSample] < 100 || described < counts[perfdata.TypeSample] {
		t.Errorf("%d samples, %d records described: too few to test anything", counts[perfdata.TypeSample], described)
	}

	r, err := perfdata.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	order := r.TimeOrder()
	var got []int64
	for {
		raw, err := order.NextRaw()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, raw.Offset)
	}
	for i, d := range dump {
		if i >= len(got) || got[i] != d.off {
			t.Fatalf("time order differs from perf's at record %d: %#x, perf %#x", i, got[min(i, len(got)-1)], d.off)
		}
	}
}

// checkReaders reads the file with every reader that can read it: all give
// the same records, with the same bytes.
func checkReaders(t *testing.T, path string, pipe bool) {
	rawAll := func(r *perfdata.Reader) []string {
		out, err := rawRecords(r)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	f, err := perfdata.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	want := rawAll(f.Reader)

	file, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	st, err := file.Stat()
	if err != nil {
		t.Fatal(err)
	}
	r, err := perfdata.NewReader(file, st.Size())
	if err != nil {
		t.Fatal(err)
	}
	if got := rawAll(r); !slices.Equal(got, want) {
		t.Errorf("NewReader read %d records, Open %d, or other bytes", len(got), len(want))
	}
	if fmt.Sprint(r.Header(), len(r.Attrs()), len(r.Features())) != fmt.Sprint(f.Header(), len(f.Attrs()), len(f.Features())) {
		t.Errorf("NewReader's header %+v differs from Open's %+v", r.Header(), f.Header())
	}
	if pipe {
		if _, err := file.Seek(0, io.SeekStart); err != nil {
			t.Fatal(err)
		}
		r, err := perfdata.NewPipeReader(file)
		if err != nil {
			t.Fatal(err)
		}
		if got := rawAll(r); !slices.Equal(got, want) {
			t.Errorf("NewPipeReader read %d records, Open %d, or other bytes", len(got), len(want))
		}
	}
}

// checkRoundTrip copies the file unchanged, as raw bytes and re-encoded
// from the decoded records, and holds the copies against the original:
// perf script and perf report print the same, and the bytes are the same
// (but for the feature table, where perf may leave room for features it
// then dropped).
func checkRoundTrip(t *testing.T, path string, pipe bool) {
	dir := t.TempDir()
	in, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}

	copied := filepath.Join(dir, "copied.data")
	f, err := perfdata.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w, err := perfdata.Create(copied, f.Options())
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Copy(f.Reader, nil); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}

	reencoded := filepath.Join(dir, "reencoded.data")
	f2, err := perfdata.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f2.Close()
	w2, err := perfdata.Create(reencoded, f2.Options())
	if err != nil {
		t.Fatal(err)
	}
	typed := 0
	for {
		rec, err := f2.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		switch rec.(type) {
		case *perfdata.Unknown, *perfdata.Invalid:
		default:
			typed++
		}
		if err := w2.WriteRecord(rec); err != nil {
			t.Fatal(err)
		}
	}
	if err := w2.Close(); err != nil {
		t.Fatal(err)
	}

	out := readFile(t, copied)
	if pipe {
		if !bytes.Equal(out, in) {
			t.Errorf("pipe-mode copy differs from the original")
		}
	} else {
		h := f.Header()
		dataEnd := h.Data.Offset + h.Data.Size
		if uint64(len(out)) < dataEnd || !bytes.Equal(out[:dataEnd], in[:dataEnd]) {
			t.Errorf("copy differs from the original before the feature sections")
		}
		r, err := perfdata.NewBytesReader(out)
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Features()) != len(f.Features()) {
			t.Fatalf("copy has %d features, original %d", len(r.Features()), len(f.Features()))
		}
		for i, ft := range r.Features() {
			if o := f.Features()[i]; ft.ID != o.ID || !bytes.Equal(ft.Data, o.Data) {
				t.Errorf("feature %d of the copy differs from the original's", ft.ID)
			}
		}
	}
	if !bytes.Equal(readFile(t, reencoded), out) {
		t.Errorf("re-encoding the %d decoded records gave other bytes than copying them", typed)
	}

	for _, args := range [][]string{
		{"script", "--no-inline", "-F", "comm,tid,time,ip,sym,period,event", "--show-mmap-events", "--show-task-events"},
		{"report", "--no-inline", "--stdio"},
	} {
		want := perfOutput(t, slices.Concat(args, []string{"-i", path})...)
		got := perfOutput(t, slices.Concat(args, []string{"-i", copied})...)
		if len(want) == 0 || got != want {
			t.Errorf("perf %s prints %d bytes for the copy, %d for the original, or other ones", args[0], len(got), len(want))
		}
	}
}

// perfOutput runs perf and returns its output without the tip perf report
// picks at random.
func perfOutput(t *testing.T, args ...string) string {
	t.Helper()
	var b strings.Builder
	for line := range strings.Lines(string(fixtures.Perf(t, args...))) {
		if !strings.HasPrefix(line, "# (Tip:") {
			b.WriteString(line)
		}
	}
	return b.String()
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// checkBuildIDs holds the build-id table against perf buildid-list's.
func checkBuildIDs(t *testing.T, path string) {
	f, err := perfdata.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	bids, err := f.BuildIDs()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, b := range bids {
		got = append(got, hex.EncodeToString(b.ID)+" "+b.Filename)
	}
	want := strings.Split(strings.TrimSpace(string(fixtures.Perf(t, "buildid-list", "-i", path))), "\n")
	slices.Sort(got)
	slices.Sort(want)
	if len(got) == 0 || !slices.Equal(got, want) {
		t.Errorf("build-ids\n%s\nperf buildid-list says\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// checkEventDescs holds the event names and ids against perf evlist's.
func checkEventDescs(t *testing.T, path string) {
	f, err := perfdata.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	descs, err := f.EventDescs()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range descs {
		if len(d.IDs) == 0 {
			t.Errorf("event %s has no ids", d.Name)
		}
		got = append(got, d.Name)
	}
	want := strings.Fields(string(fixtures.Perf(t, "evlist", "-i", path)))
	if len(got) == 0 || !slices.Equal(got, want) {
		t.Errorf("events %q, perf evlist says %q", got, want)
	}

	header := string(fixtures.Perf(t, "report", "--header-only", "-i", path))
	for _, c := range []struct {
		id    perfdata.FeatureID
		label string
	}{{perfdata.FeatureHostname, "hostname"}, {perfdata.FeatureOSRelease, "os release"}, {perfdata.FeatureArch, "arch"}} {
		s, ok, err := f.StringFeature(c.id)
		if err != nil || !ok || !strings.Contains(header, "# "+c.label+" : "+s+"\n") {
			t.Errorf("%s = %q, %v, %v; perf report --header-only says\n%s", c.label, s, ok, err, header)
		}
	}
}
