package cfi_test

import (
	"debug/elf"
	"encoding/binary"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/jitprof/jitprof/internal/cfi"
)

// row is a row Machine.Run gives.
type row struct {
	loc uint64
	st  cfi.State
}

// ehFrame writes an .eh_frame of one CIE and one FDE with the writer's
// helpers: the CIE's augmentation "zR" gives the FDE's pointer encoding
// enc, and ptr writes pc_begin and pc_range at the field's offset.
func ehFrame(o cfi.ByteOrder, a *cfi.Arch, codeAlign uint64, enc byte, initial, instr []byte, ptr func(b []byte) []byte) []byte {
	eh := cfi.AppendEHEntry(nil, o, 0, func(b []byte) []byte {
		b = append(b, 1, 'z', 'R', 0, byte(codeAlign), 0x78 /* -8 */, byte(a.RA), 1, enc)
		return append(b, initial...)
	})
	fde := len(eh)
	eh = cfi.AppendEHEntry(eh, o, uint32(fde+4), func(b []byte) []byte {
		b = ptr(b)
		return append(append(b, 0), instr...)
	})
	return o.AppendUint32(eh, 0)
}

// The writer's entries and instructions read back as the rows they mean,
// for each architecture's registers, in either byte order.
func TestRoundTrip(t *testing.T) {
	const code, size = 0x40_0000, 0x40
	for _, a := range []*cfi.Arch{cfi.X86_64, cfi.ARM64} {
		for _, o := range []cfi.ByteOrder{binary.LittleEndian, binary.BigEndian} {
			t.Run(a.Name+"/"+o.String(), func(t *testing.T) {
				codeAlign := uint64(1)
				if a == cfi.ARM64 {
					codeAlign = 4
				}
				// push the frame pointer (x86-64: below the return address;
				// arm64: stp x29, x30), set it up, and take it down again.
				initial := cfi.AppendDefCFA(nil, a.SP, 8)
				initial = cfi.AppendOffset(initial, a.RA, 1)
				instr := cfi.AppendAdvanceLoc(nil, o, 1)
				instr = cfi.AppendDefCFAOffset(instr, 16)
				instr = cfi.AppendOffset(instr, a.FP, 2)
				instr = cfi.AppendAdvanceLoc(instr, o, 300) // advance_loc2
				instr = cfi.AppendDefCFARegister(instr, a.FP)
				instr = cfi.AppendAdvanceLoc(instr, o, 2)
				instr = cfi.AppendDefCFA(instr, a.SP, 8)
				instr = cfi.AppendRestore(instr, a.FP)
				secAddr := uint64(0x50_0000)
				eh := ehFrame(o, a, codeAlign, cfi.PEPCRel|cfi.PESdata4, initial, instr, func(b []byte) []byte {
					b = o.AppendUint32(b, uint32(code-(secAddr+uint64(len(b)))))
					return o.AppendUint32(b, size*300)
				})
				if len(eh)%8 != 4 {
					t.Errorf(".eh_frame of %d bytes: entries not 8-aligned", len(eh))
				}

				s := &cfi.Section{File: "f", Name: ".eh_frame", Data: eh, Addr: secAddr, EH: true, Order: o}
				m := &cfi.Machine{Arch: a}
				var rows []row
				var fdes int
				for off := 0; off < len(eh); {
					e, err := s.Next(off)
					if err != nil {
						t.Fatal(err)
					}
					off += len(e.Data)
					if e.CIE || e.Terminator() {
						continue
					}
					fdes++
					c, err := s.CIE(e.CIEOff)
					if err != nil {
						t.Fatal(err)
					}
					if err := m.Init(c); err != nil {
						t.Fatal(err)
					}
					if c.RA != a.RA || c.CodeAlign != codeAlign || c.DataAlign != -8 || c.Enc != cfi.PEPCRel|cfi.PESdata4 {
						t.Errorf("CIE %+v", c)
					}
					f, err := s.FDE(&e, c)
					if err != nil {
						t.Fatal(err)
					}
					if f.Start != code || f.End != code+size*300 {
						t.Errorf("FDE [%#x, %#x), want [%#x, %#x)", f.Start, f.End, code, code+size*300)
					}
					err = m.Run(&f, func(loc uint64, st *cfi.State) { rows = append(rows, row{loc, *st}) })
					if err != nil {
						t.Fatal(err)
					}
				}
				if fdes != 1 {
					t.Fatalf("%d FDEs", fdes)
				}
				ra := cfi.RegRule{Kind: cfi.RegOffset, Off: -8}
				saved := cfi.RegRule{Kind: cfi.RegOffset, Off: -16}
				at := func(units uint64) uint64 { return code + units*codeAlign }
				want := []row{
					{at(0), cfi.State{CFAReg: a.SP, CFAOff: 8, RA: ra}},
					{at(1), cfi.State{CFAReg: a.SP, CFAOff: 16, RA: ra, FP: saved}},
					{at(301), cfi.State{CFAReg: a.FP, CFAOff: 16, RA: ra, FP: saved}},
					{at(303), cfi.State{CFAReg: a.SP, CFAOff: 8, RA: ra}},
				}
				same := func(x, y row) bool {
					return x.loc == y.loc && x.st.CFAExpr == nil && x.st.CFAReg == y.st.CFAReg &&
						x.st.CFAOff == y.st.CFAOff && x.st.RA == y.st.RA && x.st.FP == y.st.FP
				}
				if !slices.EqualFunc(rows, want, same) {
					t.Errorf("rows\n%+v\nwant\n%+v", rows, want)
				}
			})
		}
	}
}

// Each pointer encoding an FDE's pc_begin may have reads as its value;
// those FDEs cannot use are errors, not guesses.
func TestPointerEncodings(t *testing.T) {
	const secAddr = 0x1000
	o := binary.LittleEndian
	cases := []struct {
		name     string
		enc      byte
		addrSize int
		field    []byte // pc_begin then pc_range
		start    uint64
		err      string
	}{
		{"absptr 8", cfi.PEAbs, 8, o.AppendUint64(o.AppendUint64(nil, 0x7f00_0000_1000), 16), 0x7f00_0000_1000, ""},
		{"absptr 4", cfi.PEAbs, 4, o.AppendUint32(o.AppendUint32(nil, 0x8000_1000), 16), 0x8000_1000, ""},
		{"udata2", cfi.PEUdata2, 8, []byte{0x34, 0x12, 16, 0}, 0x1234, ""},
		{"sdata2 pcrel", cfi.PEPCRel | cfi.PESdata2, 8, []byte{0xfe, 0xff, 16, 0}, secAddr + 8 - 2, ""},
		{"udata4", cfi.PEUdata4, 8, o.AppendUint32(o.AppendUint32(nil, 0xffff_0000), 16), 0xffff_0000, ""},
		{"sdata4 pcrel", cfi.PEPCRel | cfi.PESdata4, 8, o.AppendUint32(o.AppendUint32(nil, uint32(0x100)), 16), secAddr + 8 + 0x100, ""},
		{"udata8", cfi.PEUdata8, 8, o.AppendUint64(o.AppendUint64(nil, 0x1_0000_0000), 16), 0x1_0000_0000, ""},
		{"sdata8 pcrel", cfi.PEPCRel | cfi.PESdata8, 8, o.AppendUint64(o.AppendUint64(nil, ^uint64(7)), 16), secAddr, ""},
		{"uleb128", cfi.PEUleb, 8, []byte{0x80, 0x20, 16}, 0x1000, ""},
		{"sleb128 pcrel", cfi.PEPCRel | cfi.PESleb, 8, []byte{0x70, 16}, secAddr + 8 - 16, ""},
		{"datarel", cfi.PEDataRel | cfi.PESdata4, 8, make([]byte, 8), 0, "pointer encoding 0x3b"},
		{"aligned", cfi.PEAligned, 8, make([]byte, 16), 0, "pointer encoding 0x50"},
		{"indirect", cfi.PEInd | cfi.PEPCRel | cfi.PESdata4, 8, make([]byte, 8), 0, "indirect"},
		{"no such format", 0x05, 8, make([]byte, 8), 0, "pointer encoding 0x5"},
		{"truncated", cfi.PEUdata8, 8, make([]byte, 6), 0, "truncated"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cie := []byte{0, 0, 0, 0, 0, 0, 0, 0, 1, 'z', 'R', 0, 1, 0x78, 16, 1, c.enc}
			o.PutUint32(cie, uint32(len(cie)-4))
			fde := o.AppendUint32(nil, uint32(4+len(c.field)+1))
			fde = o.AppendUint32(fde, uint32(len(cie)+4)) // back to the CIE at 0
			fde = append(append(fde, c.field...), 0)      // no augmentation data
			// pc_begin lies at len(cie)+8: the section starts that much
			// lower for the pcrel cases to come out at secAddr+8.
			s := &cfi.Section{Data: append(cie, fde...), Addr: secAddr - uint64(len(cie)), EH: true, Order: o, AddrSize: c.addrSize}
			e, err := s.Next(len(cie))
			if err != nil {
				t.Fatal(err)
			}
			ci, err := s.CIE(e.CIEOff)
			if err != nil {
				t.Fatal(err)
			}
			f, err := s.FDE(&e, ci)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Errorf("err = %v, want %q", err, c.err)
				}
				return
			}
			if err != nil || f.Start != c.start || f.End != c.start+16 || f.PCOff != 8 {
				t.Errorf("FDE [%#x, %#x) pc_begin at +%d, %v; want [%#x, %#x) at +8", f.Start, f.End, f.PCOff, err, c.start, c.start+16)
			}
		})
	}
}

// Entries that cannot be read are errors naming the section and the
// offset; a zero length is a terminator, and .debug_frame's CIE ids and
// pointers are its own.
func TestEntries(t *testing.T) {
	o := binary.LittleEndian
	cie := []byte{10, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 1, 0, 1, 0x78, 16, 0}
	fde := append(o.AppendUint32(o.AppendUint32(nil, 20), 0), make([]byte, 16)...)
	cases := []struct {
		name string
		data []byte
		eh   bool
		want []string // per entry: "cie", "fde@<cie offset>", "end", or an error's text
	}{
		{".debug_frame", append(append(slices.Clone(cie), fde...), 0, 0, 0, 0), false, []string{"cie", "fde@0", "end"}},
		{".eh_frame's id 0 is a CIE", []byte{4, 0, 0, 0, 0, 0, 0, 0, 4, 0, 0, 0, 12, 0, 0, 0}, true, []string{"cie", "fde@0"}},
		{"64-bit", append(o.AppendUint64([]byte{0xff, 0xff, 0xff, 0xff}, 8), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff), false, []string{"cie"}},
		{"trailing bytes", []byte{0, 0, 0, 0, 1, 2}, true, []string{"end", "f: .x+0x4: 2 trailing bytes cannot hold an entry"}},
		{"length past the end", []byte{0, 0, 0, 0, 100, 0, 0, 0, 0}, true, []string{"end", "f: .x+0x4: entry length 100 does not fit the 1 bytes left"}},
		{"64-bit length cut", []byte{0xff, 0xff, 0xff, 0xff, 1, 0}, true, []string{"f: .x+0x0: 64-bit entry length truncated"}},
		{"length below the id", []byte{2, 0, 0, 0, 0, 0}, true, []string{"f: .x+0x0: entry length 2 does not fit the 2 bytes left"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := &cfi.Section{File: "f", Name: ".x", Data: c.data, EH: c.eh, Order: o}
			var got []string
			for off := 0; off < len(c.data); {
				e, err := s.Next(off)
				var ce *cfi.Error
				if err != nil {
					if !errors.As(err, &ce) {
						t.Errorf("%T is not a *cfi.Error", err)
					}
					got = append(got, err.Error())
					break
				}
				off += len(e.Data)
				switch {
				case e.Terminator():
					got = append(got, "end")
				case e.CIE:
					got = append(got, "cie")
				default:
					got = append(got, "fde@"+string(rune('0'+e.CIEOff)))
				}
			}
			if !slices.Equal(got, c.want) {
				t.Errorf("entries %q, want %q", got, c.want)
			}
		})
	}
}

// Bad CIEs are errors their FDEs report; augmentations without data and a
// personality of any application are passed over.
func TestCIEs(t *testing.T) {
	o := binary.LittleEndian
	cie := func(body ...byte) []byte {
		return append(o.AppendUint32(o.AppendUint32(nil, uint32(4+len(body))), 0), body...)
	}
	cases := []struct {
		name string
		data []byte
		init string // Machine.Init's error
		err  string
	}{
		{"zPLR", cie(1, 'z', 'P', 'L', 'R', 0, 1, 0x78, 16, 7, cfi.PEDataRel|cfi.PESdata4, 1, 2, 3, 4, 0x1b, 0x1b, 0x0c, 7, 8), "", ""},
		{"zRSBG", cie(1, 'z', 'R', 'S', 'B', 'G', 0, 1, 0x78, 16, 1, 0x1b), "", ""},
		{"version 3, return address as ULEB128", cie(3, 0, 1, 0x78, 0x80, 0x01), "", ""},
		{"version 2", cie(2, 0, 1, 0x78, 16), "", "version 2"},
		{"unknown augmentation", cie(1, 'z', 'X', 0, 1, 0x78, 16, 0), "", `unknown 'X'`},
		{"augmentation without z", cie(1, 'e', 'h', 0, 1, 0x78, 16), "", `augmentation "eh"`},
		{"augmentation data past the entry", cie(1, 'z', 'R', 0, 1, 0x78, 16, 9, 0x1b), "", "runs past"},
		{"augmentation data short of its fields", cie(1, 'z', 'P', 'R', 0, 1, 0x78, 16, 2, 0x04, 0), "", "personality: truncated"},
		{"aligned personality", cie(1, 'z', 'P', 0, 1, 0x78, 16, 2, cfi.PEAligned, 0), "", "personality: pointer encoding 0x50"},
		{"truncated", cie(1, 'z', 'R', 0, 1), "", "truncated"},
		{"not a CIE", append(o.AppendUint32(o.AppendUint32(nil, 8), 4), 1, 0, 1, 0x78), "", "not a CIE"},
		{"code alignment 0", cie(1, 0, 0, 0x78, 16), "code alignment factor 0", ""},
		{"bad initial instructions", cie(1, 0, 1, 0x78, 16, cfi.OpRestoreState), "initial instructions: instruction at +0x0: DW_CFA_restore_state without a remembered state", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := &cfi.Section{Data: c.data, EH: true, Order: o}
			ci, err := s.CIE(0)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Errorf("err = %v, want %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if again, _ := s.CIE(0); again != ci {
				t.Error("the CIE is parsed again")
			}
			err = (&cfi.Machine{Arch: cfi.X86_64}).Init(ci)
			if c.init == "" && err != nil || c.init != "" && (err == nil || err.Error() != c.init) {
				t.Errorf("Init: %v, want %q", err, c.init)
			}
		})
	}
	if _, err := (&cfi.Section{Data: make([]byte, 8), EH: true, Order: o}).CIE(8); err == nil || err.Error() != "outside the section" {
		t.Errorf("CIE past the end: %v", err)
	}
}

func TestFits(t *testing.T) {
	cases := []struct {
		v        uint64
		enc      byte
		addrSize int
		want     bool
	}{
		{0x7fff_ffff, cfi.PESdata4, 8, true},
		{0x8000_0000, cfi.PESdata4, 8, false},
		{^uint64(0x7fff_ffff), cfi.PESdata4, 8, true}, // -2^31
		{^uint64(0x8000_0000), cfi.PESdata4, 8, false},
		{0xffff_ffff, cfi.PEUdata4, 8, true},
		{0x1_0000_0000, cfi.PEUdata4, 8, false},
		{0x1_0000, cfi.PEUdata2, 8, false},
		{^uint64(0), cfi.PEAbs, 8, true},
		{0x1_0000_0000, cfi.PESdata4, 4, true}, // as wide as an address: wraps
	}
	for _, c := range cases {
		if got := cfi.Fits(c.v, c.enc, c.addrSize); got != c.want {
			t.Errorf("Fits(%#x, %#x, %d) = %v", c.v, c.enc, c.addrSize, got)
		}
	}
}

func TestArch(t *testing.T) {
	for _, c := range []struct {
		name    string
		machine elf.Machine
		want    *cfi.Arch
	}{
		{"x86_64", elf.EM_X86_64, cfi.X86_64},
		{"aarch64", elf.EM_AARCH64, cfi.ARM64},
		{"arm64", elf.EM_AARCH64, cfi.ARM64},
		{"riscv64", elf.EM_RISCV, nil},
	} {
		a, err := cfi.ArchNamed(c.name)
		if a != c.want || (err == nil) != (c.want != nil) {
			t.Errorf("ArchNamed(%q) = %v, %v", c.name, a, err)
		}
		a, err = cfi.ArchOf(c.machine)
		if a != c.want || (err == nil) != (c.want != nil) {
			t.Errorf("ArchOf(%v) = %v, %v", c.machine, a, err)
		}
	}
}
