package jitdump_test

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jitprof/jitprof/jitdump"
	"github.com/jitprof/jitprof/jitelf"
)

// row is an unwinding table row: from code offset at on, the rule as
// llvm-dwarfdump prints it.
type row struct {
	at   int
	rule string
}

// frames are the frames minijit's functions build on each architecture.
// frame gives the FrameInfo and the rows for a function of size bytes:
// prologue at the start, epilogue before the last instruction.
var frames = []struct {
	name    string
	machine elf.Machine
	frame   func(size int) (jitdump.FrameInfo, []row)
}{
	{"x86-64 push rbp", elf.EM_X86_64, func(size int) (jitdump.FrameInfo, []row) {
		// push rbp at 0, mov rbp, rsp at 1, pop rbp at size-2, ret at size-1
		return jitdump.FrameInfo{CodeAlign: 1, DataAlign: -8, ReturnAddress: 16,
				Initial: jitdump.CFAProgram{}.DefCFA(7, 8).Offset(16, 1),
				Instructions: jitdump.CFAProgram{}.AdvanceLoc(1).DefCFAOffset(16).Offset(6, 2).
					AdvanceLoc(3).DefCFARegister(6).
					AdvanceLoc(uint32(size-1-4)).DefCFA(7, 8).Restore(6)},
			[]row{
				{0, "CFA=RSP+8: RIP=[CFA-8]"},
				{1, "CFA=RSP+16: RBP=[CFA-16], RIP=[CFA-8]"},
				{4, "CFA=RBP+16: RBP=[CFA-16], RIP=[CFA-8]"},
				{size - 1, "CFA=RSP+8: RIP=[CFA-8]"},
			}
	}},
	{"arm64 stp x29, x30", elf.EM_AARCH64, func(size int) (jitdump.FrameInfo, []row) {
		// stp at 0, mov x29, sp at 4, ldp at size-8, ret at size-4
		return jitdump.FrameInfo{CodeAlign: 4, DataAlign: -8, ReturnAddress: 30,
				Initial: jitdump.CFAProgram{}.DefCFA(31, 0),
				Instructions: jitdump.CFAProgram{}.AdvanceLoc(1).DefCFAOffset(16).Offset(29, 2).Offset(30, 1).
					AdvanceLoc(1).DefCFARegister(29).
					AdvanceLoc(uint32(size-4-8)/4).DefCFA(31, 0).Restore(29).Restore(30)},
			[]row{
				{0, "CFA=WSP"},
				{4, "CFA=WSP+16: W29=[CFA-16], W30=[CFA-8]"},
				{8, "CFA=W29+16: W29=[CFA-16], W30=[CFA-8]"},
				{size - 4, "CFA=WSP"},
			}
	}},
}

// sizes take the epilogue's advance through each DW_CFA_advance_loc
// form: 6 bits, 1, 2 and 4 bytes.
var sizes = []int{32, 300, 70000, 1 << 20}

// TestUnwindingInfoReadByTools writes the tables into ELF images (jitelf
// keeps a single function's .eh_frame as the runtime wrote it) and has
// llvm-dwarfdump and readelf read them: both must accept them, and
// llvm-dwarfdump's unwinding rows must be those the frame builds.
func TestUnwindingInfoReadByTools(t *testing.T) {
	for _, tool := range []string{"llvm-dwarfdump-14", "readelf"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is not installed (scripts/test.sh installs it): %v", tool, err)
		}
	}
	for _, f := range frames {
		for _, size := range sizes {
			t.Run(fmt.Sprintf("%s/%d", f.name, size), func(t *testing.T) {
				fi, rows := f.frame(size)
				u, err := fi.UnwindingInfo(uint64(size))
				if err != nil {
					t.Fatal(err)
				}
				path := filepath.Join(t.TempDir(), "f.so")
				var img bytes.Buffer
				opts := jitelf.Options{Machine: f.machine, Class: elf.ELFCLASS64, ByteOrder: binary.LittleEndian}
				if _, err := jitelf.Write(&img, opts, []jitelf.Function{{Name: "f", Code: make([]byte, size), CodeAddr: 0x10000, Unwind: u}}); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, img.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
				ef, err := elf.Open(path)
				if err != nil {
					t.Fatal(err)
				}
				text := ef.Section(".text").Addr
				ef.Close()

				dump := tool(t, "llvm-dwarfdump-14", "--eh-frame", path)
				for _, r := range rows {
					if want := fmt.Sprintf("0x%x: %s\n", text+uint64(r.at), r.rule); !strings.Contains(dump, want) {
						t.Errorf("llvm-dwarfdump lacks the row %q:\n%s", want, dump)
					}
				}
				tool(t, "readelf", "--debug-dump=frames-interp", path)
			})
		}
	}
}

// tool runs a tool that must exit 0 and complain about nothing.
func tool(t *testing.T, args ...string) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, stderr.Bytes())
	}
	out := stdout.String()
	if stderr.Len() > 0 || strings.Contains(strings.ToLower(out), "warning") || strings.Contains(strings.ToLower(out), "error") {
		t.Errorf("%s complains:\n%s%s", strings.Join(args, " "), stderr.Bytes(), out)
	}
	return out
}

// TestUnwindingInfoLayout follows every pointer of the tables the way an
// unwinder does, with the tables placed where perf inject places them (the
// .eh_frame 8-aligned after the code, the .eh_frame_hdr right after it), so
// that perf, which copies them unchanged, finds the code from them.
func TestUnwindingInfoLayout(t *testing.T) {
	o := binary.NativeEndian
	for _, size := range []int{1, 7, 8, 9, 30, 1000} {
		fi, _ := frames[0].frame(max(size, 8))
		u, err := fi.UnwindingInfo(uint64(size))
		if err != nil {
			t.Fatal(err)
		}
		eh := int64(size+7) &^ 7 // offsets from the code's start
		hdr := eh + int64(len(u.EHFrame))
		if u.MappedSize != uint64(len(u.EHFrame)+len(u.EHFrameHdr)) {
			t.Errorf("size %d: MappedSize %d, want the %d bytes of the tables", size, u.MappedSize, len(u.EHFrame)+len(u.EHFrameHdr))
		}
		h := u.EHFrameHdr
		if len(h) != 20 || !bytes.Equal(h[:4], []byte{1, 0x1b, 0x03, 0x3b}) {
			t.Fatalf("size %d: .eh_frame_hdr % x: want version 1, pcrel sdata4 eh_frame_ptr, udata4 count, datarel sdata4 table of one entry", size, h)
		}
		s32 := func(b []byte, at int) int64 { return int64(int32(o.Uint32(b[at:]))) }
		if got := hdr + 4 + s32(h, 4); got != eh {
			t.Errorf("size %d: eh_frame_ptr leads to %d, not the .eh_frame at %d", size, got, eh)
		}
		if n := o.Uint32(h[8:]); n != 1 {
			t.Errorf("size %d: fde_count %d", size, n)
		}
		if got := hdr + s32(h, 12); got != 0 {
			t.Errorf("size %d: the search table's initial location is %d, not the code's start", size, got)
		}
		fde := hdr + s32(h, 16) - eh // in the .eh_frame
		e := u.EHFrame
		if fde < 0 || fde+16 > int64(len(e)) {
			t.Fatalf("size %d: the search table's FDE at %d is outside the %d-byte .eh_frame", size, fde, len(e))
		}
		if cie := fde + 4 - int64(o.Uint32(e[fde+4:])); cie != 0 || o.Uint32(e[4:]) != 0 {
			t.Errorf("size %d: the FDE's CIE pointer leads to %d, not the CIE at 0", size, cie)
		}
		if got := eh + fde + 8 + s32(e, int(fde)+8); got != 0 {
			t.Errorf("size %d: the FDE's pc_begin leads to %d, not the code's start", size, got)
		}
		if got := o.Uint32(e[fde+12:]); got != uint32(size) {
			t.Errorf("size %d: the FDE's pc_range is %d", size, got)
		}
		for off := 0; off < len(e); {
			n := int(o.Uint32(e[off:]))
			if n == 0 {
				if off+4 != len(e) {
					t.Errorf("size %d: terminator at %d, before the end %d", size, off, len(e))
				}
				break
			}
			if (n+4)%8 != 0 {
				t.Errorf("size %d: entry at %d is %d bytes, not a multiple of 8", size, off, n+4)
			}
			off += n + 4
		}
	}
}

func TestUnwindingInfoTooLarge(t *testing.T) {
	fi, _ := frames[0].frame(64)
	if _, err := fi.UnwindingInfo(1 << 31); err == nil {
		t.Error("tables for 2 GiB of code: no error, though pc-relative sdata4 pointers cannot reach")
	}
	if _, err := (&jitdump.FrameInfo{}).UnwindingInfo(64); err == nil {
		t.Error("a FrameInfo with CodeAlign 0: no error")
	}
}

// BenchmarkUnwindingInfo is the cost a JIT pays per function it loads.
func BenchmarkUnwindingInfo(b *testing.B) {
	fi, _ := frames[0].frame(64)
	for b.Loop() {
		if _, err := fi.UnwindingInfo(64); err != nil {
			b.Fatal(err)
		}
	}
}
