package perfdata_test

import (
	"strings"
	"testing"

	"github.com/jitprof/jitprof/perfdata"
)

// TestSwitchShort: a switch record too short for its fields and sample_id
// decodes as Invalid, naming its type and offset, not as a switch with
// garbage in it.
func TestSwitchShort(t *testing.T) {
	attrs := synthAttrs(perfdata.SampleIdentifier|perfdata.SampleTID|perfdata.SampleTime, 0, true)
	raw := func(typ perfdata.RecordType, size int) *perfdata.Unknown {
		b := make([]byte, size)
		b[0], b[6] = byte(typ), byte(size)
		if size >= 16 {
			b[size-8] = 11 // the identifier, last in the trailer: attrs[0]'s
		}
		return &perfdata.Unknown{RecordHeader: perfdata.RecordHeader{Raw: b}}
	}
	for _, tc := range []struct {
		name string
		rec  *perfdata.Unknown
		want string
	}{
		// header, then pid/tid, time and identifier: 32 bytes for SWITCH
		{"switch", raw(perfdata.TypeSwitch, 24), "SWITCH: 24 bytes cannot hold"},
		// ... and 8 more before the trailer for SWITCH_CPU_WIDE
		{"cpu wide", raw(perfdata.TypeSwitchCPUWide, 32), "SWITCH_CPU_WIDE: 32 bytes cannot hold"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := writeSynth(t, attrs, []perfdata.Record{tc.rec}, false)
			r, err := perfdata.NewBytesReader(data)
			if err != nil {
				t.Fatal(err)
			}
			rec, err := r.Next()
			if err != nil {
				t.Fatal(err)
			}
			inv, ok := rec.(*perfdata.Invalid)
			if !ok {
				t.Fatalf("decoded as %T, want *perfdata.Invalid", rec)
			}
			if msg := inv.Err.Error(); !strings.Contains(msg, tc.want) || inv.Err.Off != inv.Offset || inv.Offset == 0 {
				t.Errorf("error %q at offset %d (record at %d), want %q there", msg, inv.Err.Off, inv.Offset, tc.want)
			}
		})
	}
}
