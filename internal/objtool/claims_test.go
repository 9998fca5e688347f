package objtool

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/jitprof/jitprof/internal/foreign"
	"github.com/jitprof/jitprof/jitelf"
)

// TestCodeBeyondTheFile: a text section whose header claims more bytes than
// the file holds (any user can write such an ELF file and run it) gives an
// error naming the file, not an allocation of what the header claims.
func TestCodeBeyondTheFile(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	image, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	f, err := elf.Open(self)
	if err != nil {
		t.Fatal(err)
	}
	text := f.Section(".text")
	index := -1
	for i, s := range f.Sections {
		if s == text {
			index = i
		}
	}
	f.Close()
	if text == nil || index < 0 {
		t.Fatal("the test binary has no .text")
	}
	// Elf64_Ehdr.e_shoff at 0x28, e_shentsize at 0x3a; Elf64_Shdr.sh_size at 0x20.
	shoff := binary.LittleEndian.Uint64(image[0x28:])
	shentsize := binary.LittleEndian.Uint16(image[0x3a:])
	binary.LittleEndian.PutUint64(image[shoff+uint64(index)*uint64(shentsize)+0x20:], 1<<40)
	path := filepath.Join(t.TempDir(), "claims")
	if err := os.WriteFile(path, image, 0o755); err != nil {
		t.Fatal(err)
	}
	ef, err := openELF(foreign.Plain(path))
	if err != nil {
		t.Fatal(err)
	}
	defer ef.close()
	if code, err := ef.code(text.Addr, text.Addr+1<<39); err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("code past the file's end: %d bytes, error %v; want an error naming the file", len(code), err)
	}
	// What the file does hold is still read.
	if code, err := ef.code(text.Addr, text.Addr+16); err != nil || len(code) != 16 {
		t.Errorf("the section's first 16 bytes: %d, %v", len(code), err)
	}

	// A sparse file as long as the claim backs it with nothing on disk:
	// its length is a claim too, and the file is refused.
	sparse := filepath.Join(t.TempDir(), "sparse")
	if err := os.WriteFile(sparse, image, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(sparse, 1<<41); err != nil {
		t.Skipf("no sparse file here: %v", err)
	}
	if ef, err := openELF(foreign.Plain(sparse)); err == nil {
		code, err := ef.code(text.Addr, text.Addr+1<<39)
		ef.close()
		t.Errorf("a sparse file claiming its code: %d bytes, error %v; want it refused", len(code), err)
	} else if !strings.Contains(err.Error(), sparse) {
		t.Errorf("the refusal %q does not name the file", err)
	}
}

// TestCompressedCode: an executable section that says it is compressed
// (SHF_COMPRESSED, which only debug sections are) gives an error naming
// the file, not a panic: debug/elf reads such a section only as a stream.
func TestCompressedCode(t *testing.T) {
	// The section's first bytes are what debug/elf takes for its
	// compression header: zlib, 64 bytes, 16-aligned.
	code := binary.LittleEndian.AppendUint64(binary.LittleEndian.AppendUint64([]byte{1, 0, 0, 0, 0, 0, 0, 0}, 64), 16)
	image, _, err := jitelf.Append(nil, jitelf.Options{}, []jitelf.Function{{Name: "f", Code: append(code, make([]byte, 40)...)}})
	if err != nil {
		t.Fatal(err)
	}
	f, err := elf.NewFile(bytes.NewReader(image))
	if err != nil {
		t.Fatal(err)
	}
	text := f.Section(".text")
	index := slices.Index(f.Sections, text)
	// Elf64_Ehdr.e_shoff at 0x28, e_shentsize at 0x3a; Elf64_Shdr.sh_flags at 0x8.
	hdr := binary.LittleEndian.Uint64(image[0x28:]) + uint64(index)*uint64(binary.LittleEndian.Uint16(image[0x3a:]))
	binary.LittleEndian.PutUint64(image[hdr+0x8:], uint64(text.Flags|elf.SHF_COMPRESSED))
	path := filepath.Join(t.TempDir(), "compressed")
	if err := os.WriteFile(path, image, 0o755); err != nil {
		t.Fatal(err)
	}
	ef, err := openELF(foreign.Plain(path))
	if err != nil {
		t.Fatal(err)
	}
	defer ef.close()
	if code, err := ef.code(text.Addr, text.Addr+16); err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("code of a compressed section: %d bytes, error %v; want an error naming the file", len(code), err)
	}
}
