package symbolize

import (
	"testing"

	"github.com/jitprof/jitprof/internal/unwind"
)

// FuzzHotspotFrame: the code bytes of a dump's compiled method are the
// runtime's, any bytes; the rules read from them, when any, start at the
// code's start and change at increasing offsets inside it, and each says
// what a HotSpot frame can be: the return address 8 bytes below a CFA at
// least 8 bytes above the stack pointer (or 16 above the frame pointer),
// the caller's rbp, when saved, below it.
func FuzzHotspotFrame(f *testing.F) {
	for _, code := range [][]byte{
		cat(bang, pushRBP, sub8, body, add8, popRBP, poll, ret, body),
		cat(uep, bang, pushRBP, sub32, body, call, body, add32, popRBP, ret),
		cat(notEntrant, bang[5:], pushRBP, sub8, body, add8, popRBP, ret),
		cat(noBangSub, noBangMov, body, add8[:3], []byte{0x10}, popRBP, ret),
		cat(stubSub, stubMov, call, popRBP, ret),
		cat(bang, pushRBP, movRSPRBP, sub8, body, add8, body, leave, ret, body),
		// A frame of 2^31+8 bytes, whose size wrapped to a negative one.
		cat([]byte{0x48, 0x81, 0xec, 0x00, 0x00, 0x00, 0x80}, []byte{0x48, 0x89, 0xac, 0x24, 0xf8, 0xff, 0xff, 0x7f}, body, popRBP, ret),
	} {
		f.Add("LWork;fib(I)J", code)
	}
	f.Add("itable stub", []byte{0x4c, 0x8b, 0x70, 0x08, 0xff, 0x63, 0x40})
	f.Fuzz(func(t *testing.T, name string, code []byte) {
		fr := newHotspotFrame(name, code)
		if fr == nil {
			return
		}
		if len(fr.rows) == 0 || fr.rows[0].off != 0 {
			t.Fatalf("rows %v: not from the code's start", fr.rows)
		}
		for i, r := range fr.rows {
			if i > 0 && (r.off <= fr.rows[i-1].off || r.rule == fr.rows[i-1].rule) {
				t.Fatalf("row %d of %v: not after the one before, or the same rule", i, fr.rows)
			}
			if int(r.off) > len(code) {
				t.Fatalf("row at %d of %d bytes of code", r.off, len(code))
			}
			switch rule := r.rule; {
			case rule.RAOff != -8 || rule.FPOff != 0 && rule.FPOff != -16:
				t.Fatalf("row at %d: %v", r.off, rule)
			case rule.Kind == unwind.KindSP && (rule.CFAOff < 8 || rule.CFAOff%8 != 0):
				t.Fatalf("row at %d: a frame of %d bytes: %v", r.off, rule.CFAOff, rule)
			case rule.Kind == unwind.KindFP && rule != hotspotFP:
				t.Fatalf("row at %d: %v", r.off, rule)
			case rule.Kind != unwind.KindSP && rule.Kind != unwind.KindFP:
				t.Fatalf("row at %d: %v", r.off, rule)
			}
		}
		// lookup agrees with the rows.
		for i, r := range fr.rows {
			for _, off := range []uint64{uint64(r.off), uint64(r.off) + 1} {
				want := r
				if i+1 < len(fr.rows) && off >= uint64(fr.rows[i+1].off) {
					want = fr.rows[i+1]
				}
				if got, ok := fr.lookup(off); !ok || got != want.rule {
					t.Fatalf("lookup(%d) = %v, %v; the rows say %v", off, got, ok, want.rule)
				}
			}
		}
	})
}
