package perfprof_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/jitprof/jitprof/internal/dumpindex/synth"
	"github.com/jitprof/jitprof/internal/perfprof"
)

// TestCallerAddress: a caller is named by the instruction before its
// return address (the call), but a return address at the first byte of a
// function with padding before it, where a signal handler returns to its
// restorer (Go's runtime.sigreturn, glibc's __restore_rt), names that
// function, as perf does, rather than no function; one right after a
// function that ends in a call still names the caller.
func TestCallerAddress(t *testing.T) {
	const base = 0x50000000
	dir := t.TempDir()
	// caller ends at 0x10, padding to 0x20, restorer runs to 0x30, where
	// next starts.
	perfMap := fmt.Sprintf("%x 10 caller\n%x 10 restorer\n%x 10 next\n", base, base+0x20, base+0x30)
	if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("perf-%d.map", synthPid)), []byte(perfMap), 0o644); err != nil {
		t.Fatal(err)
	}
	rec := synth.NewRecording()
	rec.Comm(synthPid, synthPid, "jit")
	rec.Map(synthPid, base, 0x10000, "//anon")
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
	for _, s := range res.Profile.Sample {
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
