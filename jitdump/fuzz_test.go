package jitdump_test

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/jitprof/jitprof/jitdump"
)

func seedCorpus(f *testing.F) {
	for _, h := range []jitdump.Header{{ByteOrder: binary.LittleEndian}, {ByteOrder: binary.BigEndian, Size: 48}} {
		data := encode(f, h, sample())
		f.Add(data)
		f.Add(data[:len(data)-5])
	}
}

// FuzzReader: no input panics, and reading in place and as a stream agree.
func FuzzReader(f *testing.F) {
	seedCorpus(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		readEveryWay(t, data)
	})
}

// FuzzCheck: Check handles any input that has a header, and every finding
// points into the file.
func FuzzCheck(f *testing.F) {
	seedCorpus(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := jitdump.NewReader(bytes.NewReader(data))
		if err != nil {
			return
		}
		findings, err := jitdump.Check(r)
		if err != nil {
			t.Fatal(err)
		}
		for _, fd := range findings {
			if fd.Offset < 0 || fd.Offset > int64(len(data)) {
				t.Fatalf("finding outside the %d-byte file: %v", len(data), fd)
			}
		}
	})
}
