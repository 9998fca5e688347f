package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestDemoArchive: the archive make demo reports is the recording TestDemo
// holds to minijit's truth (the same perf.data, and the dump the truth
// names), and it names every frame of the jitted functions' stacks, up to
// runtime.goexit: minijit itself is in it, so no frame of its Go code is
// [unknown]; jit:loop_b and jit:loop_c are called by jit:driver, which Go
// called; the others by Go directly.
func TestDemoArchive(t *testing.T) {
	const dir = "../../testdata/demo"
	members := demoMembers(t, dir+"/minijit.tar.gz")
	recording, err := os.ReadFile(dir + "/perf.data")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(members["perf.data"], recording) {
		t.Errorf("the archive's perf.data (%d bytes) is not %s/perf.data (%d bytes)", len(members["perf.data"]), dir, len(recording))
	}
	var truth struct{ Dump string }
	b, err := os.ReadFile(dir + "/truth.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &truth); err != nil {
		t.Fatal(err)
	}
	dump := filepath.Base(truth.Dump)
	if beside, err := os.ReadFile(filepath.Join(dir, dump)); err != nil || !bytes.Equal(members[dump], beside) {
		t.Errorf("the truth's dump %s: in the archive %d bytes, beside it %d (%v)", dump, len(members[dump]), len(beside), err)
	}

	code, out := jitprof(t, "report", "-q", "-i", dir+"/minijit.tar.gz", "-g", "--sort", "symbol", "--graph-limit", "0", "--format", "json")
	if code != 0 {
		t.Fatalf("report: exit %d", code)
	}
	var r struct {
		Entries []struct {
			Symbol  string
			Callers []*demoNode
		}
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, e := range r.Entries {
		if !strings.HasPrefix(e.Symbol, "jit:loop_") {
			continue
		}
		seen++
		// The entry's own frame first, then its callers.
		for _, chain := range demoChains(e.Callers, nil) {
			if slices.Contains(chain, unknownFrame) || chain[len(chain)-1] != "runtime.goexit.abi0" || !slices.Contains(chain, "main.main") {
				t.Errorf("%s: a stack not named to runtime.goexit: %q", e.Symbol, chain)
			}
			want := "github.com/jitprof/jitprof/examples/minijit/jit.Call.abi0"
			if e.Symbol == "jit:loop_b" || e.Symbol == "jit:loop_c" {
				want = "jit:driver"
			}
			if len(chain) < 2 || chain[1] != want {
				t.Errorf("%s: called by %q, want %s", e.Symbol, chain[1:], want)
			}
		}
	}
	if seen != 5 {
		t.Errorf("%d jitted loops in the report, want 5", seen)
	}
}

type demoNode struct {
	Symbol  string
	Callers []*demoNode
}

// demoChains returns the paths from nodes out to the outermost callers.
func demoChains(nodes []*demoNode, prefix []string) [][]string {
	var chains [][]string
	for _, n := range nodes {
		path := append(slices.Clone(prefix), n.Symbol)
		if len(n.Callers) == 0 {
			chains = append(chains, path)
			continue
		}
		chains = append(chains, demoChains(n.Callers, path)...)
	}
	return chains
}

// demoMembers returns the files of a gzip-compressed tar file by name.
func demoMembers(t *testing.T, path string) map[string][]byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	z, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	members := make(map[string][]byte)
	tr := tar.NewReader(z)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return members
		}
		if err != nil {
			t.Fatal(err)
		}
		if members[h.Name], err = io.ReadAll(tr); err != nil {
			t.Fatal(err)
		}
	}
}
