package jitdump_test

import (
	"encoding/binary"
	"fmt"
	"reflect"
	"testing"

	"github.com/jitprof/jitprof/jitdump"
)

func TestMethodNamesRoundTrip(t *testing.T) {
	want := []*jitdump.MethodNames{
		{RecordHeader: jitdump.RecordHeader{Timestamp: 7}, Class: "LWork;",
			Methods: []uint64{0x7f00_1000, 0x7f00_1060}, Names: []string{"fib(I)J", "main([Ljava/lang/String;)V"}},
		{RecordHeader: jitdump.RecordHeader{Timestamp: 8}, Class: "LEmpty;", Methods: []uint64{}, Names: []string{}},
		{RecordHeader: jitdump.RecordHeader{Timestamp: 9}, Class: "", Methods: []uint64{1}, Names: []string{""}},
	}
	for _, order := range []binary.ByteOrder{binary.LittleEndian, binary.BigEndian} {
		t.Run(fmt.Sprint(order), func(t *testing.T) {
			var recs []jitdump.Record
			for _, w := range want {
				recs = append(recs, w)
			}
			data := encode(t, jitdump.Header{ByteOrder: order}, recs)
			r, err := jitdump.NewBytesReader(data)
			if err != nil {
				t.Fatal(err)
			}
			if findings, err := jitdump.Check(r); err != nil || len(findings) != 0 {
				t.Fatalf("check: %v %v", findings, err)
			}
			r, _ = jitdump.NewBytesReader(data)
			for i, w := range want {
				rec, err := r.Next()
				if err != nil {
					t.Fatalf("record %d: %v", i, err)
				}
				g, ok := rec.(*jitdump.MethodNames)
				if !ok {
					t.Fatalf("record %d: %T", i, rec)
				}
				if g.Size%8 != 0 || g.Type.String() != "JITPROF_METHODS" || g.Timestamp != w.Timestamp {
					t.Errorf("record %d: size %d, type %s, time %d", i, g.Size, g.Type, g.Timestamp)
				}
				gv, wv := *g, *w
				gv.RecordHeader, wv.RecordHeader = jitdump.RecordHeader{}, jitdump.RecordHeader{}
				if !reflect.DeepEqual(gv, wv) {
					t.Errorf("record %d:\n got %+v\nwant %+v", i, gv, wv)
				}
			}
			if _, err := readEveryWay(t, data); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestMethodNamesLayout pins the bytes, which the JVMTI agent writes too
// (agents/jvmti/jvmti_agent.c).
func TestMethodNamesLayout(t *testing.T) {
	rec := &jitdump.MethodNames{RecordHeader: jitdump.RecordHeader{Timestamp: 5}, Class: "LA;", Methods: []uint64{0x1122}, Names: []string{"f()V"}}
	got, err := jitdump.AppendRecord(nil, binary.LittleEndian, rec)
	if err != nil {
		t.Fatal(err)
	}
	want := "02 00 50 4a 30 00 00 00 05 00 00 00 00 00 00 00 " + // id, total_size 48, timestamp
		"01 00 00 00 00 00 00 00 " + // nr_method, reserved
		"22 11 00 00 00 00 00 00 " + // the method
		"4c 41 3b 00 66 28 29 56 00 00 00 00 00 00 00 00" // "LA;", "f()V", padding
	if g := fmt.Sprintf("% x", got); g != want {
		t.Errorf("got  %s\nwant %s", g, want)
	}
	if _, err := jitdump.AppendRecord(nil, binary.LittleEndian, &jitdump.MethodNames{Methods: []uint64{1}}); err == nil {
		t.Error("a method without a name was encoded")
	}
}

// TestMethodNamesInvalid: a record whose fields do not fit is reported with
// its offset, and reading goes on after it; no count allocates beyond the
// record.
func TestMethodNamesInvalid(t *testing.T) {
	fixed := func(n uint32) []byte {
		b := make([]byte, 8)
		binary.LittleEndian.PutUint32(b, n)
		return b
	}
	tests := []struct {
		name string
		body []byte
		msg  string
	}{
		{"short", make([]byte, 7), "fixed fields"},
		{"methods past the end", append(fixed(2), make([]byte, 16)...), "nr_method 2 cannot fit"},
		{"absurd nr_method", append(fixed(0xffffffff), 0, 0), "nr_method 4294967295 cannot fit"},
		{"class without NUL", append(fixed(0), 'L', 'A'), "class name has no terminating NUL"},
		{"name without NUL", append(append(fixed(1), make([]byte, 8)...), 'L', 0, 'f'), "method 1 of 1 has no terminating NUL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { checkInvalidBody(t, jitdump.TypeMethodNames, tt.body, tt.msg) })
	}
}
