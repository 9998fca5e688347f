package elfsym

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
)

// benchFiles are large ELF files found on the machine: node's, which has
// a .symtab of 110,000 symbols and a .dynsym of 75,000, and the C
// library, whose symbols are in a debug file where one is installed.
func benchFiles(b *testing.B) map[string]string {
	files := map[string]string{}
	if node, err := exec.LookPath("node"); err == nil {
		if node, err = filepath.EvalSymlinks(node); err == nil {
			files["node"] = node
		}
	}
	for _, libc := range []string{"/usr/lib/x86_64-linux-gnu/libc.so.6", "/usr/lib/aarch64-linux-gnu/libc.so.6", "/lib64/libc.so.6"} {
		if _, err := os.Stat(libc); err == nil {
			files["libc"] = libc
			break
		}
	}
	if len(files) == 0 {
		b.Skip("no large ELF file found")
	}
	return files
}

func BenchmarkOpen(b *testing.B) {
	for name, path := range benchFiles(b) {
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				if _, err := Open(path); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkLookup looks up addresses in random symbols, the worst case,
// and in a few symbols, as in a profile of a program with hot spots.
func BenchmarkLookup(b *testing.B) {
	for name, path := range benchFiles(b) {
		tab, err := Open(path)
		if err != nil {
			b.Fatal(err)
		}
		syms := slices.Collect(tab.Symbols())
		rng := rand.New(rand.NewPCG(1, 2))
		addrs := make([]uint64, 1<<12)
		for i := range addrs {
			s := syms[rng.IntN(len(syms))]
			addrs[i] = s.Start + rng.Uint64N(max(s.End-s.Start, 1))
		}
		for _, n := range []int{len(addrs), 16} {
			b.Run(fmt.Sprintf("%s/%d-symbols", name, n), func(b *testing.B) {
				i := 0
				for b.Loop() {
					tab.Lookup(addrs[i%n])
					i++
				}
			})
		}
	}
}

func BenchmarkParseKallsyms(b *testing.B) {
	data, err := os.ReadFile("/proc/kallsyms")
	if err != nil {
		b.Skip(err)
	}
	for b.Loop() {
		if _, err := ParseKallsyms(bytes.NewReader(data)); err != nil {
			b.Fatal(err)
		}
	}
}
