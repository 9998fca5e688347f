package jitdump_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/jitprof/jitprof/jitdump"
)

// describe renders every field of a record, so that two readings can be
// compared with one string comparison and a failure shows what differs.
func describe(rec jitdump.Record) string {
	h := rec.Header()
	s := fmt.Sprintf("@%#x %s size=%d t=%d", h.Offset, h.Type, h.Size, h.Timestamp)
	switch r := rec.(type) {
	case *jitdump.CodeLoad:
		s += fmt.Sprintf(" pid=%d tid=%d vma=%#x addr=%#x size=%d index=%d name=%q code=%x", r.Pid, r.Tid, r.VMA, r.CodeAddr, r.CodeSize, r.CodeIndex, r.Name, r.Code)
	case *jitdump.CodeMove:
		s += fmt.Sprintf(" pid=%d tid=%d vma=%#x old=%#x new=%#x size=%d index=%d", r.Pid, r.Tid, r.VMA, r.OldCodeAddr, r.NewCodeAddr, r.CodeSize, r.CodeIndex)
	case *jitdump.DebugInfo:
		s += fmt.Sprintf(" addr=%#x n=%d", r.CodeAddr, r.NumEntries)
		for e := range r.Entries() {
			s += fmt.Sprintf(" [%#x %s:%d/%d]", e.Addr, e.File, e.Line, e.Discrim)
		}
	case *jitdump.UnwindingInfo:
		s += fmt.Sprintf(" mapped=%d eh_frame=%x hdr=%x", r.MappedSize, r.EHFrame, r.EHFrameHdr)
	case *jitdump.StageMark:
		s += fmt.Sprintf(" stage=%q accounting=%t", r.Name, r.Accounting)
	case *jitdump.InlineInfo:
		s += fmt.Sprintf(" index=%d addr=%#x size=%d id=%d parent=%d root=%d lines=%v name=%q file=%q", r.CodeIndex, r.CodeAddr, r.CodeSize, r.MethodID, r.ParentID, r.RootID, r.Lines, r.Name, r.File)
	case *jitdump.Unknown:
		s += fmt.Sprintf(" body=%x", r.Body)
	case *jitdump.Invalid:
		s += fmt.Sprintf(" body=%x err=%v", r.Body, r.Err)
		if r.Skipped {
			s += " skipped"
		}
	}
	return s
}

// readAll returns every record's description and the error that ended reading.
func readAll(t testing.TB, r *jitdump.Reader) ([]string, error) {
	t.Helper()
	var out []string
	for {
		rec, err := r.Next()
		if err != nil {
			if err == io.EOF {
				err = nil
			}
			return out, err
		}
		out = append(out, describe(rec))
	}
}

// readEveryWay reads data in place, as a stream, and from a file by Scan,
// in parts of the default size and in about 8 parts, so that a test that
// varies data cuts records and their headers at many places (at each,
// TestScanEveryPartSize); every way must agree.
func readEveryWay(t testing.TB, data []byte) ([]string, error) {
	t.Helper()
	br, berr := jitdump.NewBytesReader(data)
	sr, serr := jitdump.NewReader(bytes.NewReader(data))
	if (berr == nil) != (serr == nil) {
		t.Fatalf("header: bytes reader says %v, stream reader %v", berr, serr)
	}
	path := dumpPath(t)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	f, ferr := jitdump.Open(path)
	if ferr == nil {
		f.Close()
	}
	if (ferr == nil) != (berr == nil) {
		t.Fatalf("header: bytes reader says %v, Open %v", berr, ferr)
	}
	if berr != nil {
		return nil, berr
	}
	brecs, berr := readAll(t, br)
	srecs, serr := readAll(t, sr)
	// A stream cannot be searched ahead: where the bytes reader skips a
	// corrupt record to the records after it, the stream reader stops.
	if i := slices.IndexFunc(brecs, func(s string) bool { return strings.HasSuffix(s, " skipped") }); i >= 0 {
		at := "offset " + strings.TrimPrefix(strings.Fields(brecs[i])[0], "@") + ":"
		if serr == nil || !strings.Contains(serr.Error(), at) || strings.Join(brecs[:i], "\n") != strings.Join(srecs, "\n") {
			t.Fatalf("the stream reader does not stop where the bytes reader skips:\nbytes:  %v %q\nstream: %v %q", berr, brecs, serr, srecs)
		}
	} else if fmt.Sprint(berr) != fmt.Sprint(serr) || strings.Join(brecs, "\n") != strings.Join(srecs, "\n") {
		t.Fatalf("bytes and stream readers differ:\nbytes:  %v %q\nstream: %v %q", berr, brecs, serr, srecs)
	}
	for _, size := range []int{0, max(len(data)/8, 1)} {
		frecs, ferr := scanFile(t, path, size)
		if fmt.Sprint(berr) != fmt.Sprint(ferr) || strings.Join(brecs, "\n") != strings.Join(frecs, "\n") {
			t.Fatalf("bytes reader and Scan in parts of %d bytes differ:\nbytes: %v %q\nScan:  %v %q", size, berr, brecs, ferr, frecs)
		}
	}
	return brecs, berr
}

// dumpPaths holds the file each test's readEveryWay calls write, one per
// test rather than one per call (so one test's calls must not run at once):
// a directory per call made TestEveryTruncationPoint three times slower.
var dumpPaths sync.Map // testing.TB -> string

func dumpPath(t testing.TB) string {
	if p, ok := dumpPaths.Load(t); ok {
		return p.(string)
	}
	p := filepath.Join(t.TempDir(), "jit-1.dump")
	dumpPaths.Store(t, p)
	t.Cleanup(func() { dumpPaths.Delete(t) })
	return p
}

// scanFile reads the dump at path with Scan, in parts of partSize bytes (0:
// Scan's own), describing each record while Scan lends it. Errors, the
// records' among them, are told as a reader without a name tells them.
func scanFile(t testing.TB, path string, partSize int) ([]string, error) {
	t.Helper()
	f, err := jitdump.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if partSize > 0 {
		jitdump.SetScanPartSize(f, partSize)
	}
	unname := func(s string) string { return strings.ReplaceAll(s, path+": ", "jitdump: ") }
	var out []string
	err = f.Scan(func(rec jitdump.Record) error {
		out = append(out, unname(describe(rec)))
		return nil
	})
	if err != nil {
		if _, again := f.Next(); again != err {
			t.Fatalf("Scan ended with %v, then Next returned %v", err, again)
		}
		err = errors.New(unname(err.Error()))
	}
	return out, err
}

// sample returns records of every kind, as a runtime would write them.
func sample() []jitdump.Record {
	di := func() jitdump.Record {
		var b bytes.Buffer
		w, _ := jitdump.NewWriter(&b, jitdump.Header{ByteOrder: binary.LittleEndian, Pid: 1})
		w.Load(&jitdump.Function{Name: "f", Addr: 0x1000, Code: []byte{0xc3}, Lines: []jitdump.DebugEntry{
			{Addr: 0x1000, Line: 10, File: "a.js"}, {Addr: 0x1000, Line: 11, Discrim: 3, File: "dir/b.js"}}})
		w.Flush()
		r, _ := jitdump.NewBytesReader(b.Bytes())
		rec, _ := r.Next()
		rec.Header().Timestamp = 100
		return rec
	}()
	return []jitdump.Record{
		di,
		&jitdump.UnwindingInfo{RecordHeader: jitdump.RecordHeader{Type: jitdump.TypeUnwindingInfo, Timestamp: 100}, MappedSize: 28, EHFrame: []byte{1, 2, 3, 4, 5, 6, 7, 8}, EHFrameHdr: []byte{1, 0x1b, 3, 0x3b, 0, 0, 0, 0}},
		&jitdump.CodeLoad{RecordHeader: jitdump.RecordHeader{Type: jitdump.TypeCodeLoad, Timestamp: 101}, Pid: 7, Tid: 8, VMA: 0x1000, CodeAddr: 0x1000, CodeSize: 1, CodeIndex: 1, Name: "f", Code: []byte{0xc3}},
		&jitdump.CodeLoad{RecordHeader: jitdump.RecordHeader{Type: jitdump.TypeCodeLoad, Timestamp: 102}, Pid: 7, Tid: 8, VMA: 0x2000, CodeAddr: 0x2000, CodeSize: 0, CodeIndex: 2, Name: "empty"},
		&jitdump.CodeLoad{RecordHeader: jitdump.RecordHeader{Type: jitdump.TypeCodeLoad, Timestamp: 103}, Pid: 7, Tid: 9, VMA: 0, CodeAddr: 0x3000, CodeSize: 5, CodeIndex: 3, Name: "Lfoo/Bar;baz(I)V with spaces", Code: []byte{0x55, 0x48, 0x89, 0xe5, 0xc3}},
		&jitdump.CodeMove{RecordHeader: jitdump.RecordHeader{Type: jitdump.TypeCodeMove, Timestamp: 104}, Pid: 7, Tid: 8, VMA: 0x5000, OldCodeAddr: 0x3000, NewCodeAddr: 0x5000, CodeSize: 5, CodeIndex: 3},
		&jitdump.StageMark{RecordHeader: jitdump.RecordHeader{Type: jitdump.TypeStageMark, Timestamp: 104}, Name: "warm-up", Accounting: false},
		&jitdump.StageMark{RecordHeader: jitdump.RecordHeader{Type: jitdump.TypeStageMark, Timestamp: 105}, Name: "", Accounting: true},
		&jitdump.Unknown{RecordHeader: jitdump.RecordHeader{Type: 99, Timestamp: 105}, Body: []byte("future record")},
		&jitdump.CodeClose{RecordHeader: jitdump.RecordHeader{Type: jitdump.TypeCodeClose, Timestamp: 106}},
	}
}

func encode(t testing.TB, h jitdump.Header, recs []jitdump.Record) []byte {
	t.Helper()
	var b bytes.Buffer
	w, err := jitdump.NewWriter(&b, h)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if err := w.WriteRecord(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// withoutOffsets strips the offsets from descriptions, which differ between
// layouts of the same records.
func withoutOffsets(descs []string) []string {
	out := make([]string, len(descs))
	for i, d := range descs {
		out[i] = d[strings.IndexByte(d, ' ')+1:]
	}
	return out
}

func withoutSize(desc string) string {
	f := strings.Fields(desc)
	return strings.Join(append(f[1:2], f[3:]...), " ")
}

func TestRoundTripAllLayouts(t *testing.T) {
	want := sample()
	var first []string
	for _, tc := range []struct {
		order binary.ByteOrder
		size  uint32
	}{{binary.LittleEndian, 40}, {binary.BigEndian, 40}, {binary.LittleEndian, 48}, {binary.BigEndian, 96}} {
		t.Run(fmt.Sprintf("%v/%d", tc.order, tc.size), func(t *testing.T) {
			h := jitdump.Header{ByteOrder: tc.order, Size: tc.size, Version: 2, ElfMach: 183, Pid: 42, Timestamp: 5, Flags: 0}
			data := encode(t, h, want)
			r, err := jitdump.NewBytesReader(data)
			if err != nil {
				t.Fatal(err)
			}
			if got := r.Header(); got != (jitdump.Header{ByteOrder: tc.order, Version: 2, Size: tc.size, ElfMach: 183, Pid: 42, Timestamp: 5}) {
				t.Errorf("header = %+v", got)
			}
			got, err := readEveryWay(t, data)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(want) {
				t.Fatalf("%d records, want %d", len(got), len(want))
			}
			for i := range want {
				// Sizes are the writer's (padded to 8) and offsets the layout's.
				g, w := withoutSize(got[i]), withoutSize(describe(want[i]))
				if g != w {
					t.Errorf("record %d: got %s\nwant %s", i, g, w)
				}
			}
			if first == nil {
				first = withoutOffsets(got)
			} else if g := withoutOffsets(got); strings.Join(g, "\n") != strings.Join(first, "\n") {
				t.Errorf("layout changes the records:\n%s\nvs\n%s", strings.Join(g, "\n"), strings.Join(first, "\n"))
			}

			// Reading and writing again reproduces the file byte for byte.
			r, _ = jitdump.NewBytesReader(data)
			var recs []jitdump.Record
			for rec, err := r.Next(); err == nil; rec, err = r.Next() {
				recs = append(recs, rec)
			}
			if again := encode(t, r.Header(), recs); !bytes.Equal(again, data) {
				t.Errorf("re-encoding changed the file (%d vs %d bytes)", len(again), len(data))
			}
		})
	}
}

func TestEveryTruncationPoint(t *testing.T) {
	php, err := os.ReadFile("../testdata/php-fib_mandel.dump") // real, from PHP's JIT
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{
		"every record type": encode(t, jitdump.Header{ByteOrder: binary.LittleEndian, Pid: 1}, sample()),
		"php":               php,
	} {
		t.Run(name, func(t *testing.T) { truncateEverywhere(t, data) })
	}
}

// truncateEverywhere reads every prefix of data: each must deliver exactly
// the records it holds whole, and end cleanly or as truncated.
func truncateEverywhere(t *testing.T, data []byte) {
	full, err := readEveryWay(t, data)
	if err != nil {
		t.Fatal(err)
	}
	// The end offset of every record: a cut there is a clean end.
	ends := map[int]int{40: 0}
	r, _ := jitdump.NewBytesReader(data)
	for i := 1; ; i++ {
		if _, err := r.Next(); err != nil {
			break
		}
		ends[int(r.Offset())] = i
	}
	// In parallel parts: reading each of thousands of cuts every way takes
	// seconds.
	const parts = 4
	for p := range parts {
		t.Run(fmt.Sprintf("part%d", p), func(t *testing.T) {
			t.Parallel()
			for n := p * len(data) / parts; n < (p+1)*len(data)/parts; n++ {
				recs, err := readEveryWay(t, data[:n])
				switch complete, atEnd := ends[n]; {
				case n < jitdump.HeaderSize:
					if !errors.Is(err, jitdump.ErrTruncated) && !(n < 4 && err != nil) {
						t.Fatalf("cut at %d inside the header: err %v", n, err)
					}
				case atEnd:
					if err != nil || len(recs) != complete {
						t.Fatalf("cut at %d, a record boundary: %d records, err %v; want %d, nil", n, len(recs), err, complete)
					}
				default:
					var te *jitdump.TruncatedError
					if !errors.As(err, &te) {
						t.Fatalf("cut at %d: err %v, want truncation", n, err)
					}
					if strings.Join(recs, "\n") != strings.Join(full[:len(recs)], "\n") || ends[int(te.Off)] != len(recs) {
						t.Fatalf("cut at %d: %d records delivered, truncation reported at %#x", n, len(recs), te.Off)
					}
				}
			}
		})
	}
}

func TestMalformedRecords(t *testing.T) {
	le := binary.LittleEndian
	rec := func(id, size uint32, body ...[]byte) []byte {
		b := le.AppendUint32(nil, id)
		b = le.AppendUint32(b, size)
		b = le.AppendUint64(b, 1)
		for _, p := range body {
			b = append(b, p...)
		}
		return b
	}
	u64 := func(vs ...uint64) []byte {
		var b []byte
		for _, v := range vs {
			b = le.AppendUint64(b, v)
		}
		return b
	}
	good := rec(3, 16)
	tests := []struct {
		name    string
		rec     []byte
		invalid string // substring of the Invalid record's message; "" if the record is fine
		end     string // substring of the error that ends reading; "" for a clean end
	}{
		{"load too small", rec(0, 40, make([]byte, 24)), "cannot hold", ""},
		{"load name without NUL", rec(0, 60, make([]byte, 40), []byte("abcd")), "no terminating NUL", ""},
		{"load code past record", rec(0, 64, u64(0, 0, 0, 100, 1), []byte("fn\x00\x00\x00\x00\x00\x00")), "code_size 100 exceeds", ""},
		{"move too small", rec(1, 24, make([]byte, 8)), "cannot hold", ""},
		{"debug entries overflow", rec(2, 48, u64(0x1000, 2), u64(0x1000), []byte{1, 0, 0, 0, 0, 0, 0, 0}), "nr_entry 2 cannot fit", ""},
		{"debug entry file without NUL", rec(2, 56, u64(0x1000, 1), u64(0x1000), []byte{1, 0, 0, 0, 0, 0, 0, 0}, []byte("abcdefgh")), "no terminating NUL", ""},
		{"debug huge nr_entry", rec(2, 32, u64(0x1000, 1<<62)), "cannot fit", ""},
		{"unwinding data past record", rec(4, 48, u64(100, 0, 0), make([]byte, 8)), "exceeds", ""},
		{"unwinding header larger than data", rec(4, 48, u64(8, 9, 0), make([]byte, 8)), "eh_frame_hdr_size 9 exceeds", ""},
		{"size below record header", rec(0, 8), "", "smaller than the record header"},
		{"size past end contradicting fields", rec(1, 4096, make([]byte, 48)), "", "its fields need 64 bytes"},
		{"load cut short is truncation", rec(0, 4096, u64(0, 0, 0, 4035, 1), []byte("fn\x00")), "", "file ends inside a record"},
		{"load claims far more than its code", rec(0, 4096, u64(0, 0, 0, 10, 1), []byte("fn\x00")), "", "its fields need 69 bytes"},
		{"padding kept", rec(3, 24, make([]byte, 8)), "", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			data := jitdump.AppendHeader(nil, &jitdump.Header{ByteOrder: le, Version: 1, Size: 40})
			data = append(data, tc.rec...)
			endsThere := tc.end != ""
			if !endsThere {
				data = append(data, good...) // reading must go on after a bad record
			}
			recs, err := readEveryWay(t, data)
			if tc.end != "" {
				if err == nil || !strings.Contains(err.Error(), tc.end) || !strings.Contains(err.Error(), "offset 0x28") {
					t.Fatalf("err = %v, want one at offset 0x28 containing %q", err, tc.end)
				}
				return
			}
			if err != nil {
				t.Fatalf("err = %v", err)
			}
			if len(recs) != 2 || !strings.Contains(recs[1], "CODE_CLOSE") {
				t.Fatalf("records %q: the one after the bad record is missing", recs)
			}
			isInvalid := strings.Contains(recs[0], "err=")
			if isInvalid != (tc.invalid != "") || !strings.Contains(recs[0], tc.invalid) {
				t.Fatalf("record %s; want invalid with %q", recs[0], tc.invalid)
			}
		})
	}
}

func TestHeaderErrors(t *testing.T) {
	h := jitdump.AppendHeader(nil, &jitdump.Header{ByteOrder: binary.LittleEndian, Version: 1, Size: 40})
	small := bytes.Clone(h)
	binary.LittleEndian.PutUint32(small[8:], 32)
	wide := bytes.Clone(h)
	binary.LittleEndian.PutUint32(wide[8:], 1<<31)
	for _, tc := range []struct {
		name string
		data []byte
		want string
	}{
		{"empty", nil, "0 of 40 bytes"},
		{"not jitdump", []byte("\x7fELF\x02\x01\x01\x00 and more bytes than a header has......"), "not a jitdump file"},
		{"perf.data", []byte("PERFILE2h\x00\x00\x00\x00\x00\x00\x00 and more bytes than a header has"), `offset 0x0: not a jitdump file but a perf.data recording (magic "PERFILE2"): jitprof report or inject reads it`},
		{"perf.data, short", []byte("PERFILE2"), "not a jitdump file but a perf.data recording"},
		{"short", h[:20], "20 of 40 bytes"},
		{"header size too small", small, "smaller than the 40-byte header"},
		{"header larger than file", wide, "40 of 2147483648 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := readEveryWay(t, tc.data)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

// A corrupt size must not make the stream reader allocate what it claims.
func TestStreamAllocationBounded(t *testing.T) {
	data := jitdump.AppendHeader(nil, &jitdump.Header{ByteOrder: binary.LittleEndian, Version: 1, Size: 40})
	data = binary.LittleEndian.AppendUint32(data, 77)
	data = binary.LittleEndian.AppendUint32(data, 0xfffffff0)
	data = append(data, make([]byte, 4096)...)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	r, err := jitdump.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Next(); !errors.Is(err, jitdump.ErrTruncated) {
		t.Fatalf("err = %v", err)
	}
	runtime.ReadMemStats(&after)
	if got := after.TotalAlloc - before.TotalAlloc; got > 4<<20 {
		t.Fatalf("reading a %d-byte file allocated %d bytes", len(data), got)
	}
}

func TestRandomCorruption(t *testing.T) {
	base := encode(t, jitdump.Header{ByteOrder: binary.LittleEndian, Pid: 1}, sample())
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 2000 {
		data := bytes.Clone(base)
		for range 1 + rng.IntN(4) {
			data[rng.IntN(len(data))] = byte(rng.Uint32())
		}
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			recs, err := readEveryWay(t, data) // panics fail the test
			if r, herr := jitdump.NewBytesReader(data); herr == nil {
				if _, cerr := jitdump.Check(r); cerr != nil {
					t.Fatalf("Check: %v", cerr)
				}
			}
			var fe *jitdump.FormatError
			if err != nil && !errors.Is(err, jitdump.ErrTruncated) && !errors.As(err, &fe) {
				t.Fatalf("after %d records: unexpected error type %T: %v", len(recs), err, err)
			}
		})
	}
}

// TestLineBias: LLVM's listener, alone in writing a vma of 0, biases its
// line addresses; V8's loads are not.
func TestLineBias(t *testing.T) {
	if b := (&jitdump.CodeLoad{VMA: 0, CodeAddr: 0x7f0000001000}).LineBias(); b != jitdump.LLVMLineBias {
		t.Errorf("LLVM's load: bias %#x", b)
	}
	if b := (&jitdump.CodeLoad{VMA: 0x7f0000001000, CodeAddr: 0x7f0000001000}).LineBias(); b != 0 {
		t.Errorf("V8's load: bias %#x", b)
	}
}

// TestReuseRecord: with ReuseRecord the reader hands back the record of the
// same type it returned before, overwritten, and each reads as without it.
func TestReuseRecord(t *testing.T) {
	data := encode(t, jitdump.Header{ByteOrder: binary.LittleEndian, Pid: 1}, sample())
	want, err := readEveryWay(t, data)
	if err != nil {
		t.Fatal(err)
	}
	r := mustReader(t, data)
	r.ReuseRecord = true
	got, err := readAll(t, r)
	if err != nil || strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("with ReuseRecord: %v\n%s\nwant\n%s", err, strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	r = mustReader(t, data)
	r.ReuseRecord = true
	var loads []*jitdump.CodeLoad
	for rec, err := r.Next(); err == nil; rec, err = r.Next() {
		if l, ok := rec.(*jitdump.CodeLoad); ok {
			loads = append(loads, l)
		}
	}
	if len(loads) < 2 {
		t.Fatalf("%d CODE_LOADs read, want several", len(loads))
	}
	if loads[0] != loads[len(loads)-1] {
		t.Errorf("CODE_LOADs read into %p and %p, want one record reused", loads[0], loads[len(loads)-1])
	}
}

// TestRecordAt: a File reads each record again at its offset, the same as
// in its pass, in records of their own that outlive Close; offsets where no
// record starts, or whose size runs past the end, are errors.
func TestRecordAt(t *testing.T) {
	want := sample()
	path := filepath.Join(t.TempDir(), "jit-1.dump")
	for _, order := range []binary.ByteOrder{binary.LittleEndian, binary.BigEndian} {
		data := encode(t, jitdump.Header{ByteOrder: order, Size: 48, Pid: 1}, want)
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		f, err := jitdump.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		var recs, again []jitdump.Record
		for rec, err := f.Next(); err == nil; rec, err = f.Next() {
			recs = append(recs, rec)
			a, err := f.RecordAt(rec.Header().Offset)
			if err != nil {
				t.Fatalf("%v: RecordAt(%d): %v", order, rec.Header().Offset, err)
			}
			again = append(again, a)
		}
		if len(recs) != len(want) {
			t.Fatalf("%v: %d records, want %d", order, len(recs), len(want))
		}
		for i := range recs {
			if g, w := describe(again[i]), describe(recs[i]); g != w {
				t.Errorf("%v: record %d read again: %s\nwant %s", order, i, g, w)
			}
		}
		before := make([]string, len(again))
		for i, rec := range again {
			before[i] = describe(rec)
		}
		for _, off := range []int64{0, 47, int64(len(data)), int64(len(data)) - 8, -1} {
			if rec, err := f.RecordAt(off); err == nil {
				t.Errorf("%v: RecordAt(%d) = %s, want an error", order, off, describe(rec))
			}
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		for i, rec := range again {
			if g := describe(rec); g != before[i] {
				t.Errorf("%v: record %d after Close: %s, want %s", order, i, g, before[i])
			}
		}
	}
}

// checkInvalidBody reads a record of type typ and the given body, followed
// by a CODE_CLOSE: the record is invalid, at its offset, saying msg, and
// reading goes on to the next.
func checkInvalidBody(t *testing.T, typ jitdump.RecordType, body []byte, msg string) {
	t.Helper()
	data := encode(t, jitdump.Header{ByteOrder: binary.LittleEndian}, []jitdump.Record{
		&jitdump.Unknown{RecordHeader: jitdump.RecordHeader{Type: typ}, Body: body},
		&jitdump.CodeClose{},
	})
	r, _ := jitdump.NewBytesReader(data)
	rec, err := r.Next()
	if err != nil {
		t.Fatal(err)
	}
	inv, ok := rec.(*jitdump.Invalid)
	if !ok || !strings.Contains(inv.Err.Error(), msg) || inv.Err.Off != jitdump.HeaderSize {
		t.Fatalf("got %#v, want an invalid record at %d saying %q", rec, jitdump.HeaderSize, msg)
	}
	if rec, err := r.Next(); err != nil || rec.Header().Type != jitdump.TypeCodeClose {
		t.Errorf("reading did not go on: %v %v", rec, err)
	}
}
