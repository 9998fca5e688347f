package unwind

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"

	"github.com/jitprof/jitprof/internal/cfi"
	"github.com/jitprof/jitprof/internal/elfsym"
	"github.com/jitprof/jitprof/internal/elfwrite"
	"github.com/jitprof/jitprof/internal/foreign"
	"github.com/jitprof/jitprof/jitdump"
)

// debugFrame assembles a .debug_frame (DWARF 4 CIE, absolute 8-byte
// addresses) of one CIE with the x86-64 entry rules and fdes.
func debugFrame(fdes []testFDE) []byte {
	o := binary.LittleEndian
	entry := func(b []byte, body []byte) []byte {
		for (len(body)+4)%8 != 0 {
			body = append(body, cfi.OpNop)
		}
		return append(o.AppendUint32(b, uint32(len(body))), body...)
	}
	cie := o.AppendUint32(nil, 0xffffffff)
	cie = append(cie, 4, 0, 8, 0, 1, 0x78, rip) // version, "", address and segment size, alignments, ra
	cie = append(cie, jitdump.CFAProgram{}.DefCFA(rsp, 8).Offset(rip, 1)...)
	b := entry(nil, cie)
	for _, f := range fdes {
		body := o.AppendUint32(nil, 0) // the CIE at offset 0
		body = o.AppendUint64(body, f.start)
		body = o.AppendUint64(body, f.size)
		b = entry(b, append(body, f.instr...))
	}
	return b
}

func buildIDNote(id []byte) []byte {
	o := binary.LittleEndian
	n := o.AppendUint32(nil, 4)
	n = o.AppendUint32(n, uint32(len(id)))
	n = o.AppendUint32(n, 3) // NT_GNU_BUILD_ID
	return append(append(n, "GNU\x00"...), id...)
}

// writeELF writes an x86-64 shared object with the sections given, its
// code [0x1000, 0x1100) in an executable PT_LOAD.
func writeELF(t *testing.T, path string, sections []elfwrite.Section) {
	f := &elfwrite.File{Format: elfwrite.Format{Class: elf.ELFCLASS64, Order: binary.LittleEndian},
		Type: elf.ET_DYN, Machine: elf.EM_X86_64,
		Progs: []elf.ProgHeader{{Type: elf.PT_LOAD, Flags: elf.PF_R | elf.PF_X, Off: 0x1000, Vaddr: 0x1000, Filesz: 0x100, Memsz: 0x100, Align: 0x1000}}}
	for _, s := range sections {
		f.Add(s)
	}
	var out bytes.Buffer
	if _, err := f.WriteTo(&out); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, out.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// A separate debug file's .debug_frame fills what the file's .eh_frame
// leaves out, found where perf looks for it, inside the file's root (as a
// container's are, foreign.Rules.Root); the .eh_frame
// wins where both describe the code, and a debug file of another build is
// not used.
func TestDebugFile(t *testing.T) {
	const recorded = "/opt/app/lib/libx.so"
	id := []byte{0xab, 0xcd, 1, 2, 3, 4, 5, 6}
	other := []byte{0xab, 0xcd, 9, 9, 9, 9, 9, 9}
	hexID := hex.EncodeToString(id)
	// f at 0x1000 in .eh_frame: rsp+16 from +1; g at 0x1040 only in the
	// debug file: rsp+32 from +4; the debug file also has f, as rsp+64.
	fRule, gRule := Rule{Kind: KindSP, CFAOff: 16, RAOff: -8}, Rule{Kind: KindSP, CFAOff: 32, RAOff: -8}
	eh, _ := ehFrame(0x2000, []testFDE{{start: 0x1000, size: 0x40, instr: jitdump.CFAProgram{}.AdvanceLoc(1).DefCFAOffset(16)}})
	dbg := debugFrame([]testFDE{
		{start: 0x1000, size: 0x40, instr: jitdump.CFAProgram{}.AdvanceLoc(1).DefCFAOffset(64)},
		{start: 0x1040, size: 0x40, instr: jitdump.CFAProgram{}.AdvanceLoc(4).DefCFAOffset(32)},
	})
	cases := []struct {
		name, debugPath string // where the debug file is, as recorded
		debugID         []byte
		found           bool
	}{
		{"debuglink beside the file", "/opt/app/lib/libx.debug", id, true},
		{"debuglink in .debug", "/opt/app/lib/.debug/libx.debug", id, true},
		{"debuglink under /usr/lib/debug", "/usr/lib/debug/opt/app/lib/libx.debug", id, true},
		{"by build-id", "/usr/lib/debug/.build-id/" + hexID[:2] + "/" + hexID[2:] + ".debug", id, true},
		{"another build", "/opt/app/lib/libx.debug", other, false},
		{"none", "", nil, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			root := func(p string) string { return filepath.Join(dir, p) }
			link := append([]byte("libx.debug\x00\x00"), 0, 0, 0, 0) // name, padding, CRC (not checked)
			if c.name == "by build-id" {
				link = nil
			}
			secs := []elfwrite.Section{
				{SectionHeader: elf.SectionHeader{Name: ".note.gnu.build-id", Type: elf.SHT_NOTE, Flags: elf.SHF_ALLOC, Addralign: 4}, Data: buildIDNote(id)},
				{SectionHeader: elf.SectionHeader{Name: ".text", Type: elf.SHT_PROGBITS, Flags: elf.SHF_ALLOC | elf.SHF_EXECINSTR, Addr: 0x1000, Addralign: 0x1000}, Data: make([]byte, 0x100)},
				{SectionHeader: elf.SectionHeader{Name: ".eh_frame", Type: elf.SHT_PROGBITS, Flags: elf.SHF_ALLOC, Addr: 0x2000, Addralign: 8}, Data: eh},
			}
			if link != nil {
				secs = append(secs, elfwrite.Section{SectionHeader: elf.SectionHeader{Name: ".gnu_debuglink", Type: elf.SHT_PROGBITS, Addralign: 4}, Data: link})
			}
			writeELF(t, root(recorded), secs)
			if c.debugPath != "" {
				writeELF(t, root(c.debugPath), []elfwrite.Section{
					{SectionHeader: elf.SectionHeader{Name: ".note.gnu.build-id", Type: elf.SHT_NOTE, Flags: elf.SHF_ALLOC, Addralign: 4}, Data: buildIDNote(c.debugID)},
					{SectionHeader: elf.SectionHeader{Name: ".eh_frame", Type: elf.SHT_NOBITS, Flags: elf.SHF_ALLOC, Addr: 0x2000, Addralign: 8, Size: uint64(len(eh))}},
					{SectionHeader: elf.SectionHeader{Name: ".debug_frame", Type: elf.SHT_PROGBITS, Addralign: 8}, Data: dbg},
				})
			}
			inRoot := func(p string) foreign.Path { return foreign.Path{Name: p, Rules: foreign.Rules{Root: dir}} }
			tab, err := OpenELF(recorded, elfsym.Recorded{BuildID: id}, inRoot)
			if err != nil {
				t.Fatal(err)
			}
			if err := tab.Err(); err != nil {
				t.Errorf("Err: %v", err)
			}
			if r, ok := tab.Lookup(0x1001); !ok || r != fRule {
				t.Errorf("f: Lookup = %v, %v; want the .eh_frame's %v", r, ok, fRule)
			}
			r, ok := tab.Lookup(0x1044)
			if c.found && (!ok || r != gRule) {
				t.Errorf("g: Lookup = %v, %v; want the debug file's %v", r, ok, gRule)
			}
			if !c.found && ok {
				t.Errorf("g: Lookup = %v; want none", r)
			}
			if r, ok := tab.Lookup(0x1080); ok {
				t.Errorf("after g: Lookup = %v", r)
			}
		})
	}
}
