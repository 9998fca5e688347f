package elfsym

import (
	"bytes"
	"compress/zlib"
	"debug/elf"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jitprof/jitprof/internal/elfwrite"
	"github.com/jitprof/jitprof/internal/foreign"
)

// claimsELF is an x86-64 shared object with a build-id, a function, a
// .gnu_debuglink naming link, and a .debug_frame compressed (zlib) from
// inflated zero bytes.
func claimsELF(t *testing.T, link string, inflated int) []byte {
	t.Helper()
	o := binary.LittleEndian
	note := o.AppendUint32(nil, 4)
	note = o.AppendUint32(note, 8)
	note = o.AppendUint32(note, 3) // NT_GNU_BUILD_ID
	note = append(note, "GNU\x00\x01\x02\x03\x04\x05\x06\x07\x08"...)
	f := &elfwrite.File{Format: elfwrite.Format{Class: elf.ELFCLASS64, Order: binary.LittleEndian},
		Type: elf.ET_DYN, Machine: elf.EM_X86_64}
	text := f.Add(elfwrite.Section{SectionHeader: elf.SectionHeader{Name: ".text", Type: elf.SHT_PROGBITS,
		Flags: elf.SHF_ALLOC | elf.SHF_EXECINSTR, Addr: 0x1000, Addralign: 16}, Data: make([]byte, 64)})
	f.Add(elfwrite.Section{SectionHeader: elf.SectionHeader{Name: ".note.gnu.build-id", Type: elf.SHT_NOTE,
		Flags: elf.SHF_ALLOC, Addralign: 4}, Data: note})
	f.Add(elfwrite.Section{SectionHeader: elf.SectionHeader{Name: ".gnu_debuglink", Type: elf.SHT_PROGBITS,
		Addralign: 4}, Data: append([]byte(link), 0, 0, 0, 0, 0, 0, 0, 0)})
	f.Add(elfwrite.Section{SectionHeader: elf.SectionHeader{Name: ".debug_frame", Type: elf.SHT_PROGBITS,
		Flags: elf.SHF_COMPRESSED, Addralign: 8}, Data: compressed(make([]byte, inflated))})
	f.Symbols = func(yield func(elfwrite.Symbol) bool) {
		yield(elfwrite.Symbol{Name: "fn", Info: elf.ST_INFO(elf.STB_GLOBAL, elf.STT_FUNC), Section: text, Value: 0x1000, Size: 64})
	}
	var out bytes.Buffer
	if _, err := f.WriteTo(&out); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// compressed is data as a compressed ELF64 section holds it: a header
// (Elf64_Chdr), then zlib's stream.
func compressed(data []byte) []byte {
	o := binary.LittleEndian
	b := o.AppendUint32(nil, uint32(elf.COMPRESS_ZLIB))
	b = o.AppendUint32(b, 0)
	b = o.AppendUint64(b, uint64(len(data)))
	b = o.AppendUint64(b, 1)
	z := bytes.NewBuffer(b)
	zw, _ := zlib.NewWriterLevel(z, zlib.BestCompression)
	zw.Write(data)
	zw.Close()
	return z.Bytes()
}

// patchSection sets, in the ELF64 image img, fields of the header of the
// section named name: each an offset into Elf64_Shdr (0x08 sh_flags, 0x18
// sh_offset, 0x20 sh_size) and its value.
func patchSection(t *testing.T, img []byte, name string, fields ...[2]uint64) {
	t.Helper()
	f, err := elf.NewFile(bytes.NewReader(img))
	if err != nil {
		t.Fatal(err)
	}
	o := binary.LittleEndian
	shoff, shentsize := o.Uint64(img[0x28:]), uint64(o.Uint16(img[0x3a:]))
	for i, s := range f.Sections {
		if s.Name == name {
			for _, f := range fields {
				o.PutUint64(img[shoff+uint64(i)*shentsize+f[0]:], f[1])
			}
			return
		}
	}
	t.Fatalf("no section %s", name)
}

// TestSectionClaims: the lengths an ELF file's headers claim size no
// memory: a note or section is read only as far as the file holds it on
// disk (a sparse file is refused), a compressed section only to a bounded
// multiple of its size, and a .gnu_debuglink leads nowhere outside the
// file's directories. Each ran jitprof out of memory, or out of the
// directory, before.
func TestSectionClaims(t *testing.T) {
	cases := []struct {
		name string
		make func(t *testing.T, path string)
		// check returns what is wrong with the file at path as read.
		check func(t *testing.T, path string)
	}{
		{"a sparse file whose build-id note claims 256 MiB", func(t *testing.T, path string) {
			img := claimsELF(t, "lib.debug", 0)
			patchSection(t, img, ".note.gnu.build-id", [2]uint64{0x20, 256 << 20})
			writeSparse(t, path, img, 512<<20)
		}, refused("sparse")},
		{"a sparse file whose symbol table claims 256 MiB", func(t *testing.T, path string) {
			img := claimsELF(t, "lib.debug", 0)
			patchSection(t, img, ".symtab", [2]uint64{0x20, 256 << 20})
			writeSparse(t, path, img, 512<<20)
		}, refused("sparse")},
		{"section names compressed from 256 MiB", func(t *testing.T, path string) {
			// The names, then zeros, compressed at the end of the file:
			// the standard library decompresses them before any check.
			img := claimsELF(t, "lib.debug", 0)
			f, err := elf.NewFile(bytes.NewReader(img))
			if err != nil {
				t.Fatal(err)
			}
			names, _ := f.Sections[len(f.Sections)-1].Data()
			at := uint64(len(img))
			img = append(img, compressed(append(names, make([]byte, 256<<20-len(names))...))...)
			patchSection(t, img, ".shstrtab", [2]uint64{0x08, uint64(elf.SHF_COMPRESSED)}, [2]uint64{0x18, at}, [2]uint64{0x20, uint64(len(img)) - at})
			writeFile(t, path, img)
		}, refused("compressed")},
		{"a compressed section of 256 MiB in a few hundred KiB", func(t *testing.T, path string) {
			writeFile(t, path, claimsELF(t, "lib.debug", 256<<20))
		}, func(t *testing.T, path string) {
			f, err := OpenFile(foreign.Plain(path))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			data, err := f.Data(f.Section(".debug_frame"))
			if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), ".debug_frame") {
				t.Errorf("Data: %d bytes, error %v; want an error naming the file and section", len(data), err)
			}
		}},
		{"a debuglink out of the directory", func(t *testing.T, path string) {
			writeFile(t, path, claimsELF(t, "../../etc/secret.debug", 0))
		}, func(t *testing.T, path string) {
			f, err := OpenFile(foreign.Plain(path))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			for _, name := range DebugFiles(path, f) {
				if strings.Contains(name, "secret") {
					t.Errorf("debug file %s looked for", name)
				}
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "lib.so")
			c.make(t, path)
			c.check(t, path)
		})
	}
	// What the file does hold is read.
	path := filepath.Join(t.TempDir(), "lib.so")
	writeFile(t, path, claimsELF(t, "lib.debug", 1<<20))
	tab, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer tab.Close()
	if s, ok := tab.Lookup(0x1010); !ok || s.Name != "fn" || len(tab.BuildID()) != 8 {
		t.Errorf("Lookup = %v, %v; build-id %x", s, ok, tab.BuildID())
	}
	f, err := OpenFile(foreign.Plain(path))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if data, err := f.Data(f.Section(".debug_frame")); err != nil || len(data) != 1<<20 {
		t.Errorf("a compressed section of 1 MiB: %d bytes, %v", len(data), err)
	}
}

// refused checks that Open refuses the file with an error naming it and
// saying why.
func refused(why string) func(t *testing.T, path string) {
	return func(t *testing.T, path string) {
		tab, err := Open(path)
		if err == nil {
			tab.Close()
			t.Fatalf("Open read the file; want it refused (%s)", why)
		}
		if !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), why) {
			t.Errorf("Open: %v; want an error naming the file and %q", err, why)
		}
	}
}

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// writeSparse writes img at path, made size bytes long by a hole.
func writeSparse(t *testing.T, path string, img []byte, size int64) {
	t.Helper()
	writeFile(t, path, img)
	if err := os.Truncate(path, size); err != nil {
		t.Skipf("no sparse file here: %v", err)
	}
}
