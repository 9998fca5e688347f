package perfprof_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/jitprof/jitprof/internal/dumpindex/synth"
	"github.com/jitprof/jitprof/internal/perfprof"
	"github.com/jitprof/jitprof/jitdump"
	"github.com/jitprof/jitprof/jitelf"
)

// TestCallerAddress: a caller is named by the instruction before its
// return address (the call), but a return address at the first byte of a
// function with padding before it, where a signal handler returns to its
// restorer (Go's runtime.sigreturn, glibc's __restore_rt), names that
// function, as perf does, rather than no function, in a file whose every
// function has a symbol; one right after a function that ends in a call
// still names the caller.
func TestCallerAddress(t *testing.T) {
	dir := t.TempDir()
	// An ELF file whose every function has a symbol: caller, 16 bytes of
	// padding (a symbol with no name), restorer, then next right after it.
	image := filepath.Join(dir, "lib.so")
	f, err := os.Create(image)
	if err != nil {
		t.Fatal(err)
	}
	code := make([]byte, 0x10)
	lay, err := jitelf.Write(f, jitelf.OptionsFor(jitdump.Header{}), []jitelf.Function{{Name: "caller", Code: code}, {Code: code}, {Name: "restorer", Code: code}, {Name: "next", Code: code}})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if lay.Offsets[1] != lay.Offsets[0]+0x10 || lay.Offsets[2] != lay.Offsets[0]+0x20 || lay.Offsets[3] != lay.Offsets[0]+0x30 {
		t.Fatalf("the image's functions are at %#x, not back to back", lay.Offsets)
	}
	const mapped = 0x50000000 // where the file's first byte is
	base := mapped + lay.Offsets[0]
	rec := synth.NewRecording()
	rec.Comm(synthPid, synthPid, "jit")
	rec.Map(synthPid, mapped, uint64(lay.Size), image)
	leaf := uint64(base + 0x34)
	cases := []struct {
		ret  uint64
		want string
	}{
		{base + 0x8, "caller"},     // a call's return address inside its caller
		{base + 0x20, "restorer"},  // a signal handler's return to its restorer
		{base + 0x30, "restorer"},  // a call ending restorer: the call is in it
		{base + 0x18, "[unknown]"}, // in the padding, a call from nowhere known
	}
	for _, c := range cases {
		rec.Sample(synthPid, leaf, c.ret)
	}
	data := filepath.Join(dir, "perf.data")
	if err := rec.Write(data); err != nil {
		t.Fatal(err)
	}
	res := run(t, perfprof.Options{Input: data})
	got := map[uint64]string{}
	for _, s := range res.Profile.PProf().Sample {
		if len(s.Location) != 2 {
			t.Fatalf("a sample of %d frames, want 2", len(s.Location))
		}
		name := "[unknown]"
		if l := s.Location[1].Line; len(l) > 0 {
			name = l[len(l)-1].Function.Name
		}
		got[s.Location[1].Address] = name
	}
	for _, c := range cases {
		// The location is at the call, the byte before the return
		// address, unless the return address itself is the frame.
		addr := c.ret - 1
		if c.ret == base+0x20 {
			addr = c.ret
		}
		if got[addr] != c.want {
			t.Errorf("return address %#x: caller %q at %#x, want %q (callers: %v)", c.ret, got[addr], addr, c.want, got)
		}
	}
}
