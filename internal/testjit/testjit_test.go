//go:build amd64 || arm64

package testjit

import (
	"os"
	"testing"
)

var kernels = []*Kernel{&LoopA, &LoopB, &LoopC, &LoopD, &LoopE}

// TestJITKernels runs the generated code and compares it with Eval, which
// proves the encodings: a wrong one crashes or returns something else.
// It runs in a writable and executable region and in one that is flipped
// for each write, the fallback for kernels that refuse the former.
func TestJITKernels(t *testing.T) {
	for _, wx := range []bool{false, true} {
		r, err := mapRegion(os.Getpagesize(), wx)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		runKernels(t, r)
	}
}

func runKernels(t *testing.T, r *Region) {
	t.Helper()
	for i, k := range kernels {
		addr, err := r.Put(i*64, k.Compile().Bytes)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range []uint64{0, 1, 2, 3, 1000, 1 << 20} {
			if got, want := Call(addr, n), k.Eval(n); got != want {
				t.Errorf("%s(%d) = %d, want %d", k.Name, n, got, want)
			}
		}
	}
}

// TestJITMoveAndReuse runs code after it was copied elsewhere and after new
// code replaced it, what the test program does under perf.
func TestJITMoveAndReuse(t *testing.T) {
	r, err := NewRegion(os.Getpagesize())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	b := LoopB.Compile().Bytes
	if _, err := r.Put(0, b); err != nil {
		t.Fatal(err)
	}
	moved, err := r.Copy(0, 64, len(b))
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Free(0, len(b)); err != nil {
		t.Fatal(err)
	}
	reused, err := r.Put(0, LoopD.Compile().Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := Call(moved, 500), LoopB.Eval(500); got != want {
		t.Errorf("moved %s(500) = %d, want %d", LoopB.Name, got, want)
	}
	if got, want := Call(reused, 500), LoopD.Eval(500); got != want {
		t.Errorf("%s(500) at the reused address = %d, want %d", LoopD.Name, got, want)
	}
}

func TestJITLines(t *testing.T) {
	for _, k := range kernels {
		c := k.Compile()
		es := c.Lines(0x1000)
		// prologue, one line per op, loop branch, epilogue
		if len(es) != len(k.Body)+3 {
			t.Fatalf("%s: %d line entries, want %d", k.Name, len(es), len(k.Body)+3)
		}
		for i, e := range es {
			if e.File != Source || e.Line != k.Line+uint32(i) || e.Addr < 0x1000 || e.Addr >= 0x1000+uint64(len(c.Bytes)) {
				t.Errorf("%s: entry %d = %+v", k.Name, i, e)
			}
			if i > 0 && e.Addr <= es[i-1].Addr {
				t.Errorf("%s: entry %d at %#x does not follow %#x", k.Name, i, e.Addr, es[i-1].Addr)
			}
		}
	}
}
