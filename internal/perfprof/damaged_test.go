package perfprof_test

import (
	"encoding/binary"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/jitprof/jitprof/internal/perfprof"
	"github.com/jitprof/jitprof/perfdata"
)

// TestDamagedRecording analyses a recording damaged two ways: samples whose
// user-stack dyn_size lies, and the file cut short. The samples whole and
// sound are in the profile, and a warning says how many were skipped and
// where the first was, or where the file ends and what is missing.
func TestDamagedRecording(t *testing.T) {
	const samples = 64
	dir := t.TempDir()
	path := writeDWARFRecording(t, dir, samples, 50, func(int) int { return 2 })
	good, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var at []int64 // each sample's offset, then the data's end
	r, err := perfdata.NewBytesReader(good)
	if err != nil {
		t.Fatal(err)
	}
	var sampleSize int
	for rec, err := r.NextRaw(); err == nil; rec, err = r.NextRaw() {
		if rec.Type() == perfdata.TypeSample {
			at, sampleSize = append(at, rec.Offset), len(rec.Bytes)
		}
	}
	if len(at) != samples {
		t.Fatalf("%d samples written, want %d", len(at), samples)
	}
	// dyn_size, the sample's last field, larger than the copy it sizes.
	lie := func(b []byte, s int) {
		binary.LittleEndian.PutUint64(b[at[s]+int64(sampleSize)-8:], stackCopy+1)
	}

	tests := []struct {
		name      string
		damage    func(b []byte) []byte
		samples   int // read, of the event
		kept      int
		malformed int
		warning   string // in a warning
		cut       bool
	}{
		{"sound", func(b []byte) []byte { return b }, samples, samples, 0, "", false},
		{"three stacks lie", func(b []byte) []byte {
			for _, s := range []int{3, 10, 40} {
				lie(b, s)
			}
			return b
		}, samples, samples - 3, 3, fmt.Sprintf("3 samples skipped, their fields not fitting them; the first: %s: offset %#x: SAMPLE: STACK_USER: dyn_size", path, at[3]), false},
		{"every stack lies", func(b []byte) []byte {
			for s := range samples {
				lie(b, s)
			}
			return b
		}, samples, 0, samples, fmt.Sprintf("%d samples skipped", samples), false},
		{"cut in sample 20", func(b []byte) []byte { return b[:at[20]+100] }, 20, 20, 0,
			fmt.Sprintf("%s: offset %#x: file ends inside the data section, 100 bytes into a record of %d", path, at[20], sampleSize), true},
		{"cut before sample 40", func(b []byte) []byte { return b[:at[40]] }, 40, 40, 0,
			fmt.Sprintf("%s: offset %#x: file ends inside the data section, between two records", path, at[40]), true},
		{"cut and lying", func(b []byte) []byte { lie(b, 5); return b[:at[30]+9] }, 30, 29, 1,
			fmt.Sprintf("1 samples skipped, their fields not fitting them; the first: %s: offset %#x", path, at[5]), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := tt.damage(append([]byte(nil), good...))
			if err := os.WriteFile(path, data, 0o644); err != nil {
				t.Fatal(err)
			}
			var warnings []string
			opts := perfprof.Options{Input: path, PerFunction: true}
			opts.Warn = func(err error) { warnings = append(warnings, err.Error()) }
			res, err := perfprof.Run(opts)
			if err != nil {
				t.Fatal(err)
			}
			if res.Samples != tt.samples || res.Kept != tt.kept || res.Malformed != tt.malformed {
				t.Errorf("%d samples read, %d kept, %d malformed; want %d, %d, %d", res.Samples, res.Kept, res.Malformed, tt.samples, tt.kept, tt.malformed)
			}
			if (res.Cut != nil) != tt.cut {
				t.Errorf("cut: %v, want one: %t", res.Cut, tt.cut)
			}
			var n int64
			for _, s := range res.Profile.PProf().Sample {
				n += s.Value[0]
			}
			if n != int64(tt.kept) {
				t.Errorf("the profile holds %d samples, want the %d kept", n, tt.kept)
			}
			all := strings.Join(warnings, "\n")
			if tt.warning == "" && all != "" || !strings.Contains(all, tt.warning) {
				t.Errorf("warnings:\n%s\nwant one saying %q", all, tt.warning)
			}
		})
	}
}
