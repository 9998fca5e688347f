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
	f.Close()
	if text == nil {
		t.Fatal("the test binary has no .text")
	}
	const shSize = 0x20 // Elf64_Shdr.sh_size
	path, ef := withTextHeader(t, image, "claims", shSize, 1<<40)
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
	const shFlags = 0x8 // Elf64_Shdr.sh_flags
	path, ef := withTextHeader(t, image, "compressed", shFlags, uint64(text.Flags|elf.SHF_COMPRESSED))
	defer ef.close()
	if code, err := ef.code(text.Addr, text.Addr+16); err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("code of a compressed section: %d bytes, error %v; want an error naming the file", len(code), err)
	}
}

// withTextHeader writes image, an ELF file, as name in a fresh directory
// with the 8-byte field at off in its .text section's header set to v, and
// opens it as objtool opens a mapping's file.
func withTextHeader(t *testing.T, image []byte, name string, off, v uint64) (string, *elfFile) {
	t.Helper()
	f, err := elf.NewFile(bytes.NewReader(image))
	if err != nil {
		t.Fatal(err)
	}
	index := slices.Index(f.Sections, f.Section(".text"))
	if index < 0 {
		t.Fatalf("%s has no .text", name)
	}
	// Elf64_Ehdr.e_shoff at 0x28, e_shentsize at 0x3a.
	hdr := binary.LittleEndian.Uint64(image[0x28:]) + uint64(index)*uint64(binary.LittleEndian.Uint16(image[0x3a:]))
	binary.LittleEndian.PutUint64(image[hdr+off:], v)
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, image, 0o755); err != nil {
		t.Fatal(err)
	}
	ef, err := openELF(foreign.Plain(path))
	if err != nil {
		t.Fatal(err)
	}
	return path, ef
}
