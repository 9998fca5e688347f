package main

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jitprof/jitprof/internal/fixtures"
	"github.com/jitprof/jitprof/jitdump"
)

// jitprof runs the command in-process and returns its exit status and output.
func jitprof(t testing.TB, args ...string) (int, string) {
	t.Helper()
	cmd := newRootCmd()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(io.Discard)
	cmd.SetArgs(args)
	err := cmd.Execute()
	if err == nil {
		return 0, out.String()
	}
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code, out.String()
	}
	return 2, out.String()
}

func writeFile(t testing.TB, data []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "jit-1.dump")
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// rewrite re-encodes every record of the dump at path with header h.
func rewrite(t testing.TB, path string, h func(*jitdump.Header)) []byte {
	t.Helper()
	f, err := jitdump.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	hdr := f.Header()
	h(&hdr)
	var out bytes.Buffer
	w, err := jitdump.NewWriter(&out, hdr)
	if err != nil {
		t.Fatal(err)
	}
	for {
		rec, err := f.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := w.WriteRecord(rec); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// independentStats walks a dump with nothing but encoding/binary, to hold
// the stats of `jitprof dump` against a reader that shares no code with it.
func independentStats(data []byte) map[string]any {
	o := binary.ByteOrder(binary.LittleEndian)
	if binary.BigEndian.Uint32(data) == jitdump.Magic {
		o = binary.BigEndian
	}
	counts := map[uint32]float64{}
	var code, entries float64
	off := uint64(o.Uint32(data[8:]))
	truncated := false
	for off < uint64(len(data)) {
		if uint64(len(data))-off < 16 || uint64(o.Uint32(data[off+4:])) > uint64(len(data))-off {
			truncated = true
			break
		}
		id, size := o.Uint32(data[off:]), uint64(o.Uint32(data[off+4:]))
		counts[id]++
		switch id {
		case 0:
			code += float64(o.Uint64(data[off+40:]))
		case 2:
			entries += float64(o.Uint64(data[off+24:]))
		}
		off += size
	}
	order := "little"
	if o == binary.BigEndian {
		order = "big"
	}
	return map[string]any{
		"byte_order": order, "version": float64(o.Uint32(data[4:])), "header_size": float64(o.Uint32(data[8:])),
		"elf_mach": float64(o.Uint32(data[12:])), "pid": float64(o.Uint32(data[20:])), "flags": float64(o.Uint64(data[32:])),
		"records":    map[string]any{"code_load": counts[0], "code_move": counts[1], "debug_info": counts[2], "close": counts[3], "unwinding_info": counts[4]},
		"code_bytes": code, "debug_entries": entries, "truncated": truncated,
	}
}

func statsOf(t testing.TB, path string) map[string]any {
	t.Helper()
	code, out := jitprof(t, "dump", "--stats", "--json", path)
	if code != 0 {
		t.Fatalf("dump --stats %s: exit %d", path, code)
	}
	var st map[string]any
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("stats JSON %q: %v", out, err)
	}
	return st
}

func TestStatsAgreeWithIndependentReader(t *testing.T) {
	for _, rt := range fixtures.Runtimes {
		t.Run(string(rt), func(t *testing.T) {
			orig := fixtures.Dump(t, rt)
			data, err := os.ReadFile(orig)
			if err != nil {
				t.Fatal(err)
			}
			variants := map[string][]byte{
				"original":       data,
				"big-endian":     rewrite(t, orig, func(h *jitdump.Header) { h.ByteOrder = binary.BigEndian }),
				"48-byte header": rewrite(t, orig, func(h *jitdump.Header) { h.Size = 48 }),
				"96-byte header": rewrite(t, orig, func(h *jitdump.Header) { h.Size = 96; h.ByteOrder = binary.BigEndian }),
				"truncated":      data[:len(data)-3],
			}
			for name, v := range variants {
				got, want := statsOf(t, writeFile(t, v)), independentStats(v)
				for key, w := range want {
					if g := fmt.Sprint(got[key]); key != "records" && g != fmt.Sprint(w) {
						t.Errorf("%s: %s = %s, independent reader says %v", name, key, g, w)
					}
				}
				gotRecs := got["records"].(map[string]any)
				for key, w := range want["records"].(map[string]any) {
					if g := gotRecs[key]; g != w {
						t.Errorf("%s: records.%s = %v, independent reader says %v", name, key, g, w)
					}
				}
			}
			if st := statsOf(t, orig); st["records"].(map[string]any)["code_load"].(float64) == 0 {
				t.Errorf("no CODE_LOAD in the %s dump", rt)
			}
		})
	}
}

func TestCheckExitStatus(t *testing.T) {
	node := fixtures.Dump(t, fixtures.Node)
	planted := writeFile(t, append(rewrite(t, node, func(*jitdump.Header) {}),
		encodeRecord(t, &jitdump.CodeMove{CodeIndex: 1 << 40, CodeSize: 16, OldCodeAddr: 0x1000, NewCodeAddr: 0x2000})...))
	notDump := writeFile(t, []byte("#!/bin/sh\necho this is not a jitdump file at all\n"))
	for _, tc := range []struct {
		name  string
		files []string
		code  int
		says  string
	}{
		{"real node dump", []string{node}, 0, "0 errors"},
		{"planted move of unknown index", []string{planted}, 1, "move-unknown-index"},
		{"not a jitdump", []string{notDump}, 2, ""},
		{"missing file", []string{filepath.Join(t.TempDir(), "none.dump")}, 2, ""},
		{"worst status wins", []string{node, planted, notDump}, 2, "move-unknown-index"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out := jitprof(t, append([]string{"check"}, tc.files...)...)
			if code != tc.code || !strings.Contains(out, tc.says) {
				t.Fatalf("exit %d, want %d; output:\n%s", code, tc.code, out)
			}
		})
	}
}

func encodeRecord(t testing.TB, rec jitdump.Record) []byte {
	b, err := jitdump.AppendRecord(nil, binary.LittleEndian, rec)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestDumpOutput(t *testing.T) {
	node := fixtures.Dump(t, fixtures.Node)
	_, text := jitprof(t, "dump", "--lines", node)
	_, js := jitprof(t, "dump", "--json", node)
	st := statsOf(t, node)
	loads := int(st["records"].(map[string]any)["code_load"].(float64))
	if n := strings.Count(text, " CODE_LOAD "); n != loads {
		t.Errorf("text output has %d CODE_LOAD lines, stats say %d", n, loads)
	}
	if !strings.Contains(text, "JS:") || !strings.Contains(text, "    0x") {
		t.Errorf("text output lacks JS functions or line entries")
	}
	n := 0
	for line := range strings.Lines(js) {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("JSON line %q: %v", line, err)
		}
		if rec["type"] == "CODE_LOAD" {
			n++
		}
	}
	if n != loads {
		t.Errorf("JSON output has %d CODE_LOADs, stats say %d", n, loads)
	}
}

// Hundreds of damaged copies of a real dump: every command exits 0, 1 or 2
// and none panics.
func TestCorruptedDumps(t *testing.T) {
	data, err := os.ReadFile(fixtures.Dump(t, fixtures.Node))
	if err != nil {
		t.Fatal(err)
	}
	data = data[:min(len(data), 64<<10)] // a real prefix: enough records, quick to run
	rng := rand.New(rand.NewPCG(3, 4))
	path := filepath.Join(t.TempDir(), "jit-1.dump")
	statuses := map[int]int{}
	for range 300 {
		bad := bytes.Clone(data)
		switch rng.IntN(3) {
		case 0:
			for range 1 + rng.IntN(8) {
				bad[rng.IntN(len(bad))] = byte(rng.Uint32())
			}
		case 1:
			bad = bad[:rng.IntN(len(bad))]
		case 2: // a plausible-looking size in a record header
			off := 40 + rng.IntN(len(bad)-48)
			binary.LittleEndian.PutUint32(bad[off:], rng.Uint32N(1<<16))
		}
		if err := os.WriteFile(path, bad, 0o644); err != nil {
			t.Fatal(err)
		}
		for _, args := range [][]string{{"dump", "--stats", "--json", path}, {"dump", "--json", "--lines", path}, {"check", path}} {
			code, _ := jitprof(t, args...)
			if code < 0 || code > 2 {
				t.Fatalf("%v: exit %d", args, code)
			}
			statuses[code]++
		}
	}
	t.Logf("exit statuses over 900 runs: %v", statuses)
}

// dump --stats on a large dump costs at most twice what cat needs to read it.
// Both are timed in the same run, best of several, as whole processes.
func TestStatsSpeedAgainstCat(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a 256 MB file")
	}
	data, err := os.ReadFile(fixtures.Dump(t, fixtures.Node))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	big := filepath.Join(dir, "big.dump")
	f, err := os.Create(big)
	if err != nil {
		t.Fatal(err)
	}
	f.Write(data[:40])
	for written := 0; written < 256<<20; written += len(data) - 40 {
		f.Write(data[40:])
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "jitprof")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	best := func(name string, args ...string) time.Duration {
		b := time.Duration(1 << 62)
		for range 5 {
			start := time.Now()
			if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
				t.Fatalf("%s: %v\n%.200s", name, err, out)
			}
			b = min(b, time.Since(start))
		}
		return b
	}
	best("cat", big) // warm the page cache
	cat, stats := best("cat", big), best(bin, "dump", "--stats", "--json", big)
	t.Logf("256 MB dump: cat %v, dump --stats %v (%.2fx)", cat, stats, float64(stats)/float64(cat))
	if stats > 2*cat {
		t.Errorf("dump --stats took %v, more than twice cat's %v", stats, cat)
	}
}
