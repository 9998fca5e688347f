package main

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jitprof/jitprof/internal/fixtures"
	"github.com/jitprof/jitprof/jitdump"
)

// bigDumpSize is the size of the dump `dump --stats` is timed on (issue 12):
// about 1.4 million records of a real Erlang dump, 28% of them DEBUG_INFO.
const bigDumpSize = 388 << 20

// bigDumpEnv names the environment variable that, when set, names the file
// bigErlangDump writes (once: an existing one is reused), so that the dump
// can be timed by other tools too, such as `time jitprof dump --stats`
// against `time cat`.
const bigDumpEnv = "JITPROF_BIG_DUMP"

// bigErlangDump returns the path of a dump of at least bigDumpSize bytes:
// the header of a real Erlang dump, then its records over and over. Each
// round gets code indexes of its own (a dump whose loads repeat an index is
// not one a runtime writes) and times after the previous round's, and each
// DEBUG_INFO stays before its CODE_LOAD.
func bigErlangDump(tb testing.TB) string {
	tb.Helper()
	path := os.Getenv(bigDumpEnv)
	if path != "" {
		if st, err := os.Stat(path); err == nil && st.Size() >= bigDumpSize {
			return path
		}
	} else {
		path = filepath.Join(tb.TempDir(), "big.dump")
	}
	data, err := os.ReadFile(fixtures.Dump(tb, fixtures.Erlang))
	if err != nil {
		tb.Fatal(err)
	}
	f, err := jitdump.NewBytesReader(data)
	if err != nil {
		tb.Fatal(err)
	}
	o, hdrSize := f.Header().ByteOrder, int(f.Header().Size)
	var indexes, first, last uint64
	first = ^uint64(0)
	for {
		rec, err := f.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			tb.Fatalf("the Erlang dump: %v", err)
		}
		h := rec.Header()
		first, last = min(first, h.Timestamp), max(last, h.Timestamp)
		if l, ok := rec.(*jitdump.CodeLoad); ok {
			indexes = max(indexes, l.CodeIndex+1)
		}
	}
	recs := data[hdrSize:]
	rounds := (bigDumpSize - hdrSize + len(recs) - 1) / len(recs)

	out, err := os.Create(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer out.Close()
	w := bufio.NewWriterSize(out, 1<<20)
	w.Write(data[:hdrSize])
	round := make([]byte, len(recs))
	for k := range uint64(rounds) {
		copy(round, recs)
		for off := 0; off < len(round); off += int(o.Uint32(round[off+4:])) {
			r := round[off:]
			o.PutUint64(r[8:], o.Uint64(r[8:])+k*(last-first+1))
			if jitdump.RecordType(o.Uint32(r)) == jitdump.TypeCodeLoad {
				o.PutUint64(r[48:], o.Uint64(r[48:])+k*indexes)
			}
		}
		w.Write(round)
	}
	if err := w.Flush(); err != nil {
		tb.Fatal(err)
	}
	if err := out.Close(); err != nil {
		tb.Fatal(err)
	}
	return path
}

// TestDumpStatsBig holds the stats of the big dump against a reader that
// shares no code with dump; every record, a real runtime's, must be valid.
func TestDumpStatsBig(t *testing.T) {
	if testing.Short() {
		t.Skip("writes a 388 MiB dump")
	}
	path := bigErlangDump(t)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want, size := independentStats(data), len(data)
	data = nil
	got := statsOf(t, path)
	for key, w := range want {
		if g := fmt.Sprint(got[key]); key != "records" && g != fmt.Sprint(w) {
			t.Errorf("%s = %s, independent reader says %v", key, g, w)
		}
	}
	records := got["records"].(map[string]any)
	for key, w := range want["records"].(map[string]any) {
		if g := records[key]; g != w {
			t.Errorf("records.%s = %v, independent reader says %v", key, g, w)
		}
	}
	if records["invalid"] != 0.0 || records["unknown"] != 0.0 || got["error"] != nil {
		t.Errorf("a dump of a real runtime's records: %v invalid, %v unknown, error %v", records["invalid"], records["unknown"], got["error"])
	}
	t.Logf("%d bytes: %v CODE_LOAD, %v DEBUG_INFO, %v debug entries", size, records["code_load"], records["debug_info"], got["debug_entries"])
}

// TestDumpNoteOnErrStream: the note on a cut-short dump goes to the
// command's error stream, where its caller (a test, an embedding program)
// set it, not to the process's.
func TestDumpNoteOnErrStream(t *testing.T) {
	var b bytes.Buffer
	w, err := jitdump.NewWriter(&b, jitdump.Header{ByteOrder: binary.LittleEndian, Pid: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Load(&jitdump.Function{Name: "f", Addr: 0x1000, Code: make([]byte, 64)}); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	path := writeFile(t, b.Bytes()[:b.Len()-3])
	for _, args := range [][]string{{"dump", path}, {"dump", "--stats", path}, {"dump", "--stats", "--json", path}} {
		cmd := newRootCmd()
		var out, errOut bytes.Buffer
		cmd.SetOut(&out)
		cmd.SetErr(&errOut)
		cmd.SetArgs(args)
		if err := cmd.Execute(); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		if want := "jitprof: note: " + path + ": offset 0x28: file ends inside a record"; !strings.HasPrefix(errOut.String(), want) {
			t.Errorf("%v: error stream %q, want %q", args, errOut.String(), want)
		}
	}
}

// BenchmarkDumpStats times `jitprof dump --stats` on the big Erlang dump,
// warm cache, from opening the file to printing the summary.
func BenchmarkDumpStats(b *testing.B) {
	path := bigErlangDump(b)
	st, err := os.Stat(path)
	if err != nil {
		b.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	_, err = io.Copy(io.Discard, f) // warm the cache
	f.Close()
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(st.Size())
	for b.Loop() {
		if err := runDump(io.Discard, io.Discard, path, dumpOptions{stats: true}); err != nil {
			b.Fatal(err)
		}
	}
}
