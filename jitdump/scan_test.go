package jitdump_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/jitprof/jitprof/jitdump"
)

func writeDump(t *testing.T, data []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "jit-1.dump")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// inPlace reads data with a bytes reader, for what Scan must give.
func inPlace(t *testing.T, data []byte) ([]string, error) {
	t.Helper()
	r, err := jitdump.NewBytesReader(data)
	if err != nil {
		t.Fatal(err)
	}
	return readAll(t, r)
}

func sameReading(t *testing.T, what string, recs []string, err error, wantRecs []string, wantErr error) {
	t.Helper()
	if fmt.Sprint(err) != fmt.Sprint(wantErr) || strings.Join(recs, "\n") != strings.Join(wantRecs, "\n") {
		t.Fatalf("%s: %v\n%s\nwant %v\n%s", what, err, strings.Join(recs, "\n"), wantErr, strings.Join(wantRecs, "\n"))
	}
}

// TestScanEveryPartSize: Scan reads the same records as Next however its
// parts cut them, a record header included, into as many parts as bytes.
func TestScanEveryPartSize(t *testing.T) {
	php, err := os.ReadFile("../testdata/php-fib_mandel.dump")
	if err != nil {
		t.Fatal(err)
	}
	all := encode(t, jitdump.Header{ByteOrder: binary.LittleEndian, Pid: 1}, sample())
	for name, data := range map[string][]byte{
		"every record type":        all,
		"big endian, wide header":  encode(t, jitdump.Header{ByteOrder: binary.BigEndian, Size: 96, Pid: 1}, sample()),
		"truncated in a record":    all[:len(all)-5],
		"truncated in its header":  all[:len(all)-20],
		"php":                      php,
		"php, size below a header": append(append([]byte{}, php...), 3, 0, 0, 0, 8, 0, 0, 0),
		"php, 4 GiB record":        append(append([]byte{}, php...), append([]byte{77, 0, 0, 0, 0xf0, 0xff, 0xff, 0xff}, make([]byte, 100)...)...),
	} {
		t.Run(name, func(t *testing.T) {
			path := writeDump(t, data)
			want, wantErr := inPlace(t, data)
			for _, size := range []int{1, 2, 3, 5, 7, 8, 13, 16, 17, 31, 64, 100, 1000, len(data), 1 << 20} {
				got, err := scanFile(t, path, size)
				sameReading(t, fmt.Sprintf("parts of %d bytes", size), got, err, want, wantErr)
			}
		})
	}
}

// TestScanRecordsLargerThanParts: records several parts long, between
// small ones, as a JIT's big functions are.
func TestScanRecordsLargerThanParts(t *testing.T) {
	big := make([]byte, 700<<10)
	for i := range big {
		big[i] = byte(i * 7)
	}
	recs := sample()
	recs = append(recs[:3:3], append([]jitdump.Record{
		&jitdump.CodeLoad{RecordHeader: jitdump.RecordHeader{Timestamp: 101}, CodeAddr: 0x10000, CodeSize: uint64(len(big)), CodeIndex: 9, Name: "big", Code: big},
		&jitdump.CodeLoad{RecordHeader: jitdump.RecordHeader{Timestamp: 101}, CodeAddr: 0x90000, CodeSize: 600 << 10, CodeIndex: 10, Name: "bigger", Code: big[:600<<10]},
	}, recs[3:]...)...)
	data := encode(t, jitdump.Header{ByteOrder: binary.LittleEndian, Pid: 1}, recs)
	want, wantErr := inPlace(t, data)
	path := writeDump(t, data)
	for _, size := range []int{0, 4096, 100 << 10} {
		got, err := scanFile(t, path, size)
		sameReading(t, fmt.Sprintf("parts of %d bytes", size), got, err, want, wantErr)
	}
}

// TestScanStopsWithFn: fn's error ends Scan at that record, and Next goes
// on with the one after; Scan after Next reads what Next left.
func TestScanStopsWithFn(t *testing.T) {
	data := encode(t, jitdump.Header{ByteOrder: binary.LittleEndian, Pid: 1}, sample())
	want, _ := inPlace(t, data)
	path := writeDump(t, data)
	f, err := jitdump.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	jitdump.SetScanPartSize(f, 16)
	if rec, err := f.Next(); err != nil || describe(rec) != want[0] {
		t.Fatalf("Next: %v, %v", rec, err)
	}
	stop := errors.New("stop")
	var got []string
	err = f.Scan(func(rec jitdump.Record) error {
		got = append(got, describe(rec))
		if len(got) == 3 {
			return stop
		}
		return nil
	})
	if err != stop {
		t.Fatalf("Scan returned %v, want fn's error", err)
	}
	rec, err := f.Next()
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, describe(rec))
	if err := f.Scan(func(rec jitdump.Record) error { got = append(got, describe(rec)); return nil }); err != nil {
		t.Fatal(err)
	}
	sameReading(t, "Next, Scan stopped, Next, Scan", got, nil, want[1:], nil)
	if err := f.Scan(func(jitdump.Record) error { return stop }); err != nil {
		t.Errorf("Scan at the end: %v", err)
	}
}

// TestScanFileCutSinceOpen: a file cut since Open ends where it now ends,
// as if Open had seen it so (through the mapping, Next would fault).
func TestScanFileCutSinceOpen(t *testing.T) {
	data := encode(t, jitdump.Header{ByteOrder: binary.LittleEndian, Pid: 1}, sample())
	for _, cut := range []int{jitdump.HeaderSize, 100, len(data) - 20, len(data) - 1} {
		path := writeDump(t, data)
		f, err := jitdump.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(path, int64(cut)); err != nil {
			t.Fatal(err)
		}
		want, wantErr := inPlace(t, data[:cut])
		var got []string
		err = f.Scan(func(rec jitdump.Record) error { got = append(got, describe(rec)); return nil })
		if err != nil {
			err = errors.New(strings.ReplaceAll(err.Error(), path+": ", "jitdump: "))
		}
		sameReading(t, fmt.Sprintf("cut to %d bytes", cut), got, err, want, wantErr)
		f.Close()
	}
}

// TestScanNotRegular: a file Open could not map, read into memory, is
// scanned there.
func TestScanNotRegular(t *testing.T) {
	data := encode(t, jitdump.Header{ByteOrder: binary.LittleEndian, Pid: 1}, sample())
	path := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Skip("no FIFO:", err)
	}
	go func() {
		if w, err := os.OpenFile(path, os.O_WRONLY, 0); err == nil {
			w.Write(data)
			w.Close()
		}
	}()
	f, err := jitdump.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var got []string
	err = f.Scan(func(rec jitdump.Record) error { got = append(got, describe(rec)); return nil })
	want, wantErr := inPlace(t, data)
	sameReading(t, "FIFO", got, err, want, wantErr)
}
