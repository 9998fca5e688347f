package perfdata_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jitprof/jitprof/perfdata"
)

// dwarfAttr is the attr of perf record --call-graph dwarf with mask and
// stack size, and the fields before the registers that perf asks for.
func dwarfAttr(mask uint64, stack uint32, extra perfdata.SampleType) *perfdata.Attr {
	return &perfdata.Attr{Type: 1, SamplePeriod: 4000, SampleType: perfdata.SampleIP | perfdata.SampleTID | perfdata.SampleTime |
		perfdata.SampleCallchain | perfdata.SampleID | perfdata.SampleRegsUser | perfdata.SampleStackUser | extra,
		Flags: perfdata.AttrSampleIDAll | perfdata.AttrExcludeCallchainUser, SampleRegsUser: mask, SampleStackUser: stack, IDs: []uint64{5}}
}

// regsFor returns one value per bit of mask, each the register's number
// plus 0x1000: what UserRegister must find by number.
func regsFor(mask uint64) []uint64 {
	var regs []uint64
	for n := range 64 {
		if mask&(1<<n) != 0 {
			regs = append(regs, 0x1000+uint64(n))
		}
	}
	return regs
}

// TestSampleUserFields writes samples with user registers and stacks as
// the kernel lays them out, in every shape the kernel writes, and reads
// them back in place and as a stream: every field, the registers by number,
// and the bytes re-encoded.
func TestSampleUserFields(t *testing.T) {
	const x86, arm64 = 0xff0fff, 1<<33 - 1 // perf's masks for --call-graph dwarf
	stack := bytes.Repeat([]byte{0xa5, 0x5a, 1, 2, 3, 4, 5, 6}, 1024)
	// header, ip, pid and tid, time, a callchain of 2, id; then the ABI,
	// the registers, the copy's size, the copy, dyn_size
	const fixed = 8 + 8 + 8 + 8 + 8 + 2*8 + 8
	tests := []struct {
		name   string
		attr   *perfdata.Attr
		sample perfdata.Sample
		regs   map[int]uint64 // by perf's number: what UserRegister gives
		absent []int          // registers UserRegister does not have
		size   int            // of the record
	}{
		{name: "x86-64, whole copy", attr: dwarfAttr(x86, 8192, 0),
			sample: perfdata.Sample{RegsABI: perfdata.RegsABI64, RegsUser: regsFor(x86), StackUserSize: 8192, StackUser: stack},
			regs:   map[int]uint64{0: 0x1000, perfdata.RegX86BP: 0x1006, perfdata.RegX86SP: 0x1007, perfdata.RegX86IP: 0x1008, 16: 0x1010, 23: 0x1017},
			absent: []int{12, 15, 24, 63, 64, -1}, size: fixed + 8 + 20*8 + 8 + 8192 + 8},
		{name: "x86-64, part of the copy", attr: dwarfAttr(x86, 8192, perfdata.SampleDataSrc),
			sample: perfdata.Sample{RegsABI: perfdata.RegsABI64, RegsUser: regsFor(x86), StackUserSize: 8192, StackUser: stack[:5544],
				Rest: []byte{1, 2, 3, 4, 5, 6, 7, 8}},
			regs: map[int]uint64{perfdata.RegX86SP: 0x1007}, size: fixed + 8 + 20*8 + 8 + 8192 + 8 + 8},
		{name: "x86-64, nothing copied", attr: dwarfAttr(x86, 8192, 0),
			sample: perfdata.Sample{RegsABI: perfdata.RegsABI64, RegsUser: regsFor(x86), StackUserSize: 8192},
			regs:   map[int]uint64{perfdata.RegX86IP: 0x1008}, size: fixed + 8 + 20*8 + 8 + 8192 + 8},
		{name: "arm64, copy cut to fit the record", attr: dwarfAttr(arm64, 65528, 0),
			sample: perfdata.Sample{RegsABI: perfdata.RegsABI64, RegsUser: regsFor(arm64), StackUserSize: 65000, StackUser: stack[:4000]},
			regs:   map[int]uint64{perfdata.RegARM64FP: 0x101d, perfdata.RegARM64LR: 0x101e, perfdata.RegARM64SP: 0x101f, perfdata.RegARM64PC: 0x1020},
			absent: []int{33}, size: fixed + 8 + 33*8 + 8 + 65000 + 8},
		{name: "kernel thread: no registers, no stack", attr: dwarfAttr(x86, 8192, 0),
			sample: perfdata.Sample{RegsABI: perfdata.RegsABINone},
			absent: []int{perfdata.RegX86SP, perfdata.RegX86IP}, size: fixed + 8 + 8},
		{name: "32-bit task", attr: dwarfAttr(0x1ff, 64, 0),
			sample: perfdata.Sample{RegsABI: perfdata.RegsABI32, RegsUser: regsFor(0x1ff), StackUserSize: 64, StackUser: stack[:64]},
			regs:   map[int]uint64{perfdata.RegX86SP: 0x1007}, size: fixed + 8 + 9*8 + 8 + 64 + 8},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := tt.sample
			s.RecordHeader = perfdata.RecordHeader{Type: perfdata.TypeSample, Misc: perfdata.MiscUser, Attr: tt.attr}
			s.IP, s.Pid, s.Tid, s.Time, s.ID = 0x401000, 7, 7, 1000, 5
			s.Callchain = []uint64{perfdata.ContextUser, 0x401000}
			path := filepath.Join(t.TempDir(), "perf.data")
			w, err := perfdata.Create(path, perfdata.Options{Attrs: []*perfdata.Attr{tt.attr}})
			if err != nil {
				t.Fatal(err)
			}
			if err := w.WriteRecord(&s); err != nil {
				t.Fatal(err)
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			data := readFile(t, path)
			f, err := os.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			for _, mode := range []string{"bytes", "stream"} {
				var r *perfdata.Reader
				if mode == "bytes" {
					r, err = perfdata.NewBytesReader(data)
				} else {
					r, err = perfdata.NewReader(f, int64(len(data)))
				}
				if err != nil {
					t.Fatal(err)
				}
				r.ReuseRecord = true
				rec, err := r.Next()
				if err != nil {
					t.Fatal(err)
				}
				got, ok := rec.(*perfdata.Sample)
				if !ok {
					t.Fatalf("%s: read a %T: %+v", mode, rec, rec)
				}
				if len(got.Raw) != tt.size {
					t.Errorf("%s: the record has %d bytes, want %d", mode, len(got.Raw), tt.size)
				}
				if gs, ws := show(got), show(&s); gs != ws {
					t.Errorf("%s: read\n%.600s\nwant\n%.600s", mode, gs, ws)
				}
				if !bytes.Equal(got.StackUser, tt.sample.StackUser) {
					t.Errorf("%s: user stack of %d bytes, want %d", mode, len(got.StackUser), len(tt.sample.StackUser))
				}
				for n, want := range tt.regs {
					if v, ok := got.UserRegister(n); !ok || v != want {
						t.Errorf("%s: register %d = %#x, %t; want %#x", mode, n, v, ok, want)
					}
				}
				for _, n := range tt.absent {
					if v, ok := got.UserRegister(n); ok {
						t.Errorf("%s: register %d = %#x, want none", mode, n, v)
					}
				}
				if enc, err := perfdata.AppendRecord(nil, got); err != nil || !bytes.Equal(enc, got.Raw) {
					t.Errorf("%s: re-encodes to %d other bytes (%v)", mode, len(enc), err)
				}
			}
		})
	}
}

// TestSampleUserFieldsEncodeErrors: fields that disagree with the attr are
// refused, not written as a record no reader could read.
func TestSampleUserFieldsEncodeErrors(t *testing.T) {
	a := dwarfAttr(0xff0fff, 8192, perfdata.SampleRaw)
	ok := perfdata.Sample{RawData: []byte{1, 2, 3, 4}, RegsABI: perfdata.RegsABI64, RegsUser: regsFor(0xff0fff), StackUserSize: 64, StackUser: make([]byte, 64)}
	for _, tc := range []struct {
		name string
		edit func(s *perfdata.Sample)
		want string // in the error; "" for none
	}{
		{"as the kernel writes it", func(*perfdata.Sample) {}, ""},
		{"raw not padded", func(s *perfdata.Sample) { s.RawData = []byte{1, 2, 3} }, "RAW of 3 bytes"},
		{"registers missing", func(s *perfdata.Sample) { s.RegsUser = s.RegsUser[:19] }, "holds 20 registers, not 19"},
		{"registers without an ABI", func(s *perfdata.Sample) { s.RegsABI = perfdata.RegsABINone }, "holds 0 registers, not 20"},
		{"stack larger than its copy", func(s *perfdata.Sample) { s.StackUser = make([]byte, 72) }, "72 bytes of stack in a copy of 64"},
		{"copy not in words", func(s *perfdata.Sample) { s.StackUserSize = 60; s.StackUser = nil }, "copy of 60"},
		{"copy larger than a record", func(s *perfdata.Sample) { s.StackUserSize = 65536 }, "exceed a record's 65535"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := ok
			s.RecordHeader.Attr = a
			tc.edit(&s)
			b, err := perfdata.AppendRecord([]byte("kept"), &s)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) || string(b) != "kept" {
				t.Errorf("error %v, bytes %q; want an error saying %q and nothing appended", err, b[:min(len(b), 8)], tc.want)
			}
		})
	}
}

// TestSampleUserFieldsCorrupt: a sample whose sizes or counts overflow its
// bytes is an *Invalid naming the file, its offset and the field; the
// records around it are read.
func TestSampleUserFieldsCorrupt(t *testing.T) {
	a := dwarfAttr(0xff0fff, 64, perfdata.SampleRaw|perfdata.SampleBranchStack)
	a.BranchSampleType = perfdata.BranchHWIndex
	s := &perfdata.Sample{RecordHeader: perfdata.RecordHeader{Attr: a}, ID: 5, RawData: []byte{1, 2, 3, 4},
		Branches: []perfdata.Branch{{From: 1, To: 2}}, RegsABI: perfdata.RegsABI64, RegsUser: regsFor(0xff0fff),
		StackUserSize: 64, StackUser: make([]byte, 48)}
	good, err := perfdata.AppendRecord(nil, s)
	if err != nil {
		t.Fatal(err)
	}
	// Where the fields are: header, ip, pid/tid, time, callchain nr (0), id.
	raw := 8 + 8 + 8 + 8 + 8 + 8
	branch := raw + 8
	regs := branch + 8 + 8 + 24
	stack := regs + 8 + 20*8
	put := func(off int, v uint64) func([]byte) []byte {
		return func(b []byte) []byte { binary.LittleEndian.PutUint64(b[off:], v); return b }
	}
	for _, tc := range []struct {
		name string
		edit func([]byte) []byte
		want string
	}{
		{"raw size", func(b []byte) []byte { binary.LittleEndian.PutUint32(b[raw:], 1<<31); return b }, "RAW of 2147483648 bytes overflows"},
		{"branch count", put(branch, 1<<40), "BRANCH_STACK of 1099511627776 entries overflows"},
		{"registers cut short", func(b []byte) []byte {
			b = b[:regs+8+8*10]
			binary.LittleEndian.PutUint16(b[6:], uint16(len(b)))
			return b
		}, "REGS_USER: 20 registers (mask 0xff0fff) overflow the 80 bytes left"},
		{"stack size", put(stack, 1<<62), "STACK_USER: a copy of 4611686018427387904 bytes"},
		{"no room for dyn_size", put(stack, 72), "STACK_USER: a copy of 72 bytes and its dyn_size overflow the 72 bytes left"},
		{"dyn_size beyond the copy", put(stack+8+64, 65), "dyn_size 65 exceeds the copy's 64 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "perf.data")
			w, err := perfdata.Create(path, perfdata.Options{Attrs: []*perfdata.Attr{a}})
			if err != nil {
				t.Fatal(err)
			}
			for _, rec := range [][]byte{good, tc.edit(bytes.Clone(good)), good} {
				if err := w.WriteRaw(rec); err != nil {
					t.Fatal(err)
				}
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			f, err := perfdata.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			recs, err := readAll(f.Reader)
			if err != nil || len(recs) != 3 {
				t.Fatalf("%d records (%v), want 3", len(recs), err)
			}
			for i, rec := range recs {
				inv, bad := rec.(*perfdata.Invalid)
				if bad != (i == 1) {
					t.Fatalf("record %d is %T", i, rec)
				}
				if !bad {
					continue
				}
				var fe *perfdata.FormatError
				if !errors.As(inv.Err, &fe) || fe.File != path || fe.Off != rec.Header().Offset || !strings.Contains(fe.Msg, tc.want) {
					t.Errorf("error %v, want one naming %s, offset %#x, saying %q", inv.Err, path, rec.Header().Offset, tc.want)
				}
				if want := fmt.Sprintf("%s: offset %#x: SAMPLE: ", path, fe.Off); !strings.HasPrefix(inv.Err.Error(), want) {
					t.Errorf("error %q does not start %q", inv.Err, want)
				}
			}
		})
	}
}
