//go:build amd64 || arm64

package jit

import (
	"os"
	"runtime"
	"testing"
)

// frames are the kinds of code this host's generator makes.
func frames() []Frame {
	if runtime.GOARCH == "amd64" {
		return []Frame{WithFrame, Frameless}
	}
	return []Frame{WithFrame}
}

var kernels = []*Kernel{&LoopA, &LoopB, &LoopC, &LoopD, &LoopE}

// slot is far more than any function with its unwinding tables takes.
const slot = 256

// TestKernels runs the generated code and compares it with Eval, which
// proves the encodings: a wrong one crashes or returns something else.
// It runs in a writable and executable region and in one that is flipped
// for each write, the fallback for kernels that refuse the former.
func TestKernels(t *testing.T) {
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
	for _, fr := range frames() {
		for i, k := range kernels {
			addr, err := r.Put(i*slot, k.Compile(fr).Bytes)
			if err != nil {
				t.Fatal(err)
			}
			for _, n := range []uint64{0, 1, 2, 3, 1000, 1 << 20} {
				if got, want := Call(addr, n), k.Eval(n); got != want {
					t.Errorf("%s(%d), frame %v = %d, want %d", k.Name, n, fr, got, want)
				}
			}
		}
	}
}

// TestDriver runs each kernel through the driver, a jitted function calling
// a jitted function, which proves the driver's encoding and that both keep
// to the register convention: a kernel clobbering the driver's registers
// would change the count or the sum.
func TestDriver(t *testing.T) {
	r, err := NewRegion(os.Getpagesize())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for _, fr := range frames() {
		driver, err := r.Put(0, CompileDriver(fr).Bytes)
		if err != nil {
			t.Fatal(err)
		}
		for i, k := range kernels {
			addr, err := r.Put((i+1)*slot, k.Compile(fr).Bytes)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range []struct{ n, calls uint64 }{{0, 0}, {5, 0}, {0, 3}, {1, 1}, {1000, 7}, {1 << 16, 3}} {
				if got, want := Drive(driver, addr, c.n, c.calls), c.calls*k.Eval(c.n); got != want {
					t.Errorf("driver calling %s(%d) %d times, frame %v = %d, want %d", k.Name, c.n, c.calls, fr, got, want)
				}
			}
		}
	}
}

// TestMoveAndReuse runs code after it was copied elsewhere and after new
// code replaced it, what minijit does under perf.
func TestMoveAndReuse(t *testing.T) {
	r, err := NewRegion(os.Getpagesize())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	b := LoopB.Compile(WithFrame).Bytes
	if _, err := r.Put(0, b); err != nil {
		t.Fatal(err)
	}
	moved, err := r.Copy(0, slot, len(b))
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Free(0, len(b)); err != nil {
		t.Fatal(err)
	}
	reused, err := r.Put(0, LoopD.Compile(WithFrame).Bytes)
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

func TestLines(t *testing.T) {
	type fn struct {
		name  string
		line  uint32
		code  *Code
		lines int
	}
	fns := []fn{{DriverName, DriverLine, CompileDriver(WithFrame), 4}} // prologue, call, loop branch, epilogue
	for _, k := range kernels {
		// prologue, one line per op, loop branch, epilogue
		fns = append(fns, fn{k.Name, k.Line, k.Compile(WithFrame), len(k.Body) + 3})
	}
	for _, f := range fns {
		es := f.code.Lines(0x1000)
		if len(es) != f.lines {
			t.Fatalf("%s: %d line entries, want %d", f.name, len(es), f.lines)
		}
		for i, e := range es {
			if e.File != Source || e.Line != f.line+uint32(i) || e.Addr < 0x1000 || e.Addr >= 0x1000+uint64(len(f.code.Bytes)) {
				t.Errorf("%s: entry %d = %+v", f.name, i, e)
			}
			if i > 0 && e.Addr <= es[i-1].Addr {
				t.Errorf("%s: entry %d at %#x does not follow %#x", f.name, i, e.Addr, es[i-1].Addr)
			}
		}
	}
}
