package elfsym

import (
	"bytes"
	"cmp"
	"debug/elf"
	"encoding/hex"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

const kallsymsText = "ffffffff81000000 T srso_alias_untrain_ret\n" +
	"ffffffff81000000 T _stext\n" +
	"ffffffff81000000 T _text\n" +
	"ffffffff81000010 t foo\n" +
	"ffffffff81000020 W weakfn\n" +
	"ffffffff81000030 r rodata_sym\n" +
	"ffffffff81000040 D data_sym\n" +
	"0000000000000000 T restricted\n" +
	"ffffffff81000050 t $x\n" +
	"not a symbol line\n" +
	"ffffffff81000058 tx too_short_type\n" +
	"ffffffff81000060 T last_kernel\n" +
	"ffffffffc0000000 t mod_a\t[ext4]\n" +
	"ffffffffc0000100 t mod_b\t[ext4]\n" +
	"ffffffffc0002000 t other\t[xfs]"

func TestParseKallsyms(t *testing.T) {
	tab, err := ParseKallsyms(strings.NewReader(kallsymsText))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		addr        uint64
		name        string
		start, end  uint64
		module      string
		shouldExist bool
	}{
		{0xffffffff80ffffff, "", 0, 0, "", false},
		// Of the symbols at one address only the last has a size after
		// the ends are fixed up, and perf keeps the one with a size.
		{0xffffffff81000000, "_text", 0xffffffff81000000, 0xffffffff81000010, "", true},
		{0xffffffff8100000f, "_text", 0xffffffff81000000, 0xffffffff81000010, "", true},
		{0xffffffff81000010, "foo", 0xffffffff81000010, 0xffffffff81000020, "", true},
		// rodata is not kept, so weakfn reaches data_sym.
		{0xffffffff81000035, "weakfn", 0xffffffff81000020, 0xffffffff81000040, "", true},
		// $x is not kept; "tx" is no type.
		{0xffffffff81000055, "data_sym", 0xffffffff81000040, 0xffffffff81000060, "", true},
		// The kernel's last symbol gets the rest of its page and the next.
		{0xffffffff81001fff, "last_kernel", 0xffffffff81000060, 0xffffffff81002000, "", true},
		{0xffffffff81002000, "", 0, 0, "", false},
		{0xffffffffc00000ff, "mod_a", 0xffffffffc0000000, 0xffffffffc0000100, "[ext4]", true},
		// So does a module's.
		{0xffffffffc0001fff, "mod_b", 0xffffffffc0000100, 0xffffffffc0002000, "[ext4]", true},
		{0xffffffffc0002fff, "other", 0xffffffffc0002000, 0xffffffffc0003000, "[xfs]", true},
		{0xffffffffc0003000, "", 0, 0, "", false},
		{0, "", 0, 0, "", false},
	}
	for _, tt := range tests {
		s, ok := tab.Lookup(tt.addr)
		if ok != tt.shouldExist || s.Name != tt.name || ok && (s.Start != tt.start || s.End != tt.end || s.Module != tt.module) {
			t.Errorf("Lookup(%#x) = %+v, %v; want %s [%#x, %#x) %s", tt.addr, s, ok, tt.name, tt.start, tt.end, tt.module)
		}
	}
	if n := tab.Len(); n != 8 {
		t.Errorf("Len() = %d, want 8", n)
	}
}

// TestKallsymsOverlap checks a module's last symbol, which reaches two
// pages on, over the next module's: perf's tree, filled in address
// order, has m2_first at the root, m1_last to its left and m2_last to its
// right, and its walk decides which one holds an address.
func TestKallsymsOverlap(t *testing.T) {
	tab, err := ParseKallsyms(strings.NewReader("ffffffffc0000f00 t m1_last\t[a]\n" +
		"ffffffffc0001000 t m2_first\t[b]\n" +
		"ffffffffc0001100 t m2_last\t[b]\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		addr uint64
		name string
	}{
		{0xffffffffc0000f80, "m1_last"},
		{0xffffffffc0001050, "m2_first"},
		{0xffffffffc0001800, "m2_last"}, // also in m1_last, which the walk does not reach
		{0xffffffffc0002fff, "m2_last"},
	} {
		if s, ok := tab.Lookup(tt.addr); !ok || s.Name != tt.name {
			t.Errorf("Lookup(%#x) = %+v, %v; want %s", tt.addr, s, ok, tt.name)
		}
	}
}

func TestReadKallsyms(t *testing.T) {
	tab, err := ReadKallsyms("/proc/kallsyms")
	if err != nil {
		if os.Getenv("CI") == "" {
			t.Skip(err)
		}
		t.Fatal(err)
	}
	if tab.Len() == 0 {
		t.Skip("kernel addresses are hidden (kptr_restrict)")
	}
	if tab.Path() != "/proc/kallsyms" {
		t.Errorf("Path() = %q", tab.Path())
	}
	syms := slices.Collect(tab.Symbols())
	for i := 1; i < len(syms); i++ {
		if syms[i].Start < syms[i-1].Start {
			t.Fatalf("symbols out of order at %d: %+v, %+v", i, syms[i-1], syms[i])
		}
	}
	if _, err := ReadKallsyms(filepath.Join(t.TempDir(), "none")); err == nil {
		t.Error("ReadKallsyms of a missing file succeeded")
	}
}

// TestRBTree checks the tree against the red-black rules and the order
// perf's insertion gives (equal keys in insertion order) after random
// insertions and erasures.
func TestRBTree(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	tree := newRBTree(0)
	var live []treeOp
	for id := int32(0); id < 3000; id++ {
		start := rng.Uint64N(500)
		tree.insert(id, start)
		live = append(live, treeOp{start, id})
		if rng.IntN(3) == 0 {
			k := rng.IntN(len(live))
			tree.erase(live[k].id)
			live = slices.Delete(live, k, k+1)
		}
		if id%100 == 0 {
			checkRBTree(t, tree, live)
		}
	}
	for len(live) > 0 {
		k := rng.IntN(len(live))
		tree.erase(live[k].id)
		live = slices.Delete(live, k, k+1)
		checkRBTree(t, tree, live)
	}
}

func checkRBTree(t *testing.T, tree *rbTree, live []treeOp) {
	t.Helper()
	var got []int32
	var walk func(n, parent int32) int
	walk = func(n, parent int32) int {
		if n == nilNode {
			return 1
		}
		if tree.up[n].parent != parent {
			t.Fatalf("node %d: parent %d, want %d", n, tree.up[n].parent, parent)
		}
		if tree.up[n].red && (tree.isRed(tree.n[n].left) || tree.isRed(tree.n[n].right)) {
			t.Fatalf("red node %d has a red child", n)
		}
		l := walk(tree.n[n].left, n)
		got = append(got, n)
		r := walk(tree.n[n].right, n)
		if l != r {
			t.Fatalf("node %d: black heights %d and %d", n, l, r)
		}
		if tree.up[n].red {
			return l
		}
		return l + 1
	}
	walk(tree.root, nilNode)
	if tree.isRed(tree.root) {
		t.Fatal("red root")
	}
	want := slices.Clone(live)
	slices.SortFunc(want, func(a, b treeOp) int {
		return cmp.Or(cmp.Compare(a.start, b.start), cmp.Compare(a.id, b.id))
	})
	if len(got) != len(want) {
		t.Fatalf("%d nodes in the tree, want %d", len(got), len(want))
	}
	for i := range got {
		if got[i] != want[i].id {
			t.Fatalf("in-order node %d is %d, want %d", i, got[i], want[i].id)
		}
	}
}

func TestVDSO(t *testing.T) {
	tab, err := VDSO()
	if err != nil {
		t.Fatal(err)
	}
	if tab.Path() != "[vdso]" || tab.Len() == 0 || len(tab.BuildID()) == 0 {
		t.Fatalf("VDSO() = path %q, %d symbols, build-id %x", tab.Path(), tab.Len(), tab.BuildID())
	}
	names := map[string]bool{}
	for s := range tab.Symbols() {
		names[s.Name] = true
		if got, ok := tab.Lookup(s.Start); !ok || got != s {
			t.Errorf("Lookup(%#x) = %+v, %v; want %+v", s.Start, got, ok, s)
		}
	}
	// Of x86-64's clock_gettime and its global alias
	// __vdso_clock_gettime, perf keeps the one that is not weak.
	if runtime.GOARCH == "amd64" && (!names["__vdso_clock_gettime"] || names["clock_gettime"]) {
		t.Errorf("vDSO symbols %v: want __vdso_clock_gettime, not clock_gettime", names)
	}
}

// TestOpenDebugFiles checks that Open takes the symbols from a debug file
// found through .gnu_debuglink, and only if it is of the same build.
func TestOpenDebugFiles(t *testing.T) {
	dir := t.TempDir()
	exe := buildC(t, dir, "plt.c", pltProgram, "-g")
	debug := filepath.Join(dir, ".debug", "plt.debug")
	splitDebug(t, exe, debug)

	tab, err := Open(exe)
	if err != nil {
		t.Fatal(err)
	}
	if tab.Path() != debug {
		t.Errorf("Path() = %q, want %q", tab.Path(), debug)
	}
	if !hasSymbol(tab, "main") {
		t.Error("main, only in the debug file, not found")
	}
	wantID := buildIDOf(t, exe)
	if !bytes.Equal(tab.BuildID(), wantID) {
		t.Errorf("BuildID() = %x, want %x", tab.BuildID(), wantID)
	}

	// A debug file from another build is not used.
	other := buildC(t, t.TempDir(), "plt.c", pltProgram+"int other_build;\n", "-g")
	if out, err := exec.Command("objcopy", "--only-keep-debug", other, debug).CombinedOutput(); err != nil {
		t.Fatalf("objcopy: %v\n%s", err, out)
	}
	tab, err = Open(exe)
	if err != nil {
		t.Fatal(err)
	}
	if tab.Path() != exe || hasSymbol(tab, "main") {
		t.Errorf("with a debug file of another build: Path() = %q, main found %v", tab.Path(), hasSymbol(tab, "main"))
	}
}

func hasSymbol(tab *Table, name string) bool {
	for s := range tab.Symbols() {
		if s.Name == name {
			return true
		}
	}
	return false
}

func buildIDOf(t *testing.T, path string) []byte {
	t.Helper()
	out, err := exec.Command("readelf", "-n", path).Output()
	if err != nil {
		t.Fatal(err)
	}
	_, id, ok := strings.Cut(string(out), "Build ID: ")
	if !ok {
		t.Fatalf("no build-id in %s", path)
	}
	b, err := hex.DecodeString(strings.Fields(id)[0])
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestVaddr checks the file offset to address mapping on a position
// independent and a fixed-address executable, against their program
// headers as debug/elf reads them.
func TestVaddr(t *testing.T) {
	dir := t.TempDir()
	for _, flags := range [][]string{{"-pie"}, {"-no-pie"}} {
		exe := buildC(t, dir, "plt.c", pltProgram, flags...)
		tab, err := Open(exe)
		if err != nil {
			t.Fatal(err)
		}
		f, err := elf.Open(exe)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range f.Progs {
			if p.Type != elf.PT_LOAD || p.Filesz == 0 {
				continue
			}
			for _, off := range []uint64{p.Off, p.Off + p.Filesz/2, p.Off + p.Filesz - 1} {
				if got, ok := tab.Vaddr(off); !ok || got != p.Vaddr+off-p.Off {
					t.Errorf("%v: Vaddr(%#x) = %#x, %v; want %#x", flags, off, got, ok, p.Vaddr+off-p.Off)
				}
			}
		}
		f.Close()
		if _, ok := tab.Vaddr(1 << 40); ok {
			t.Errorf("%v: Vaddr past the end of the file succeeded", flags)
		}
	}
}

func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	notELF := filepath.Join(dir, "not-elf")
	if err := os.WriteFile(notELF, []byte("#!/bin/sh\necho hello\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{notELF, filepath.Join(dir, "missing"), dir} {
		if _, err := Open(path); err == nil || !strings.Contains(err.Error(), path) {
			t.Errorf("Open(%q) = %v, want an error naming the file", path, err)
		}
	}
	if _, err := NewTable(bytes.NewReader([]byte("\x7fELF")), "short"); err == nil || !strings.Contains(err.Error(), "short") {
		t.Errorf("NewTable of a cut ELF header = %v, want an error naming it", err)
	}
}

// TestNamesAfterClose: names stay in the file until looked up; those
// returned before Close stay valid, the others are no longer found.
func TestNamesAfterClose(t *testing.T) {
	node, err := exec.LookPath("node") // a large program with a .symtab
	if err != nil {
		t.Skip(err)
	}
	tab, err := Open(node)
	if err != nil {
		t.Fatal(err)
	}
	var read, last Symbol
	for s := range tab.Symbols() {
		if read.Name == "" {
			if got, _ := tab.Lookup(s.Start); got == s && s.Name != "" {
				read = s
			}
		}
		last = s
	}
	if read.Name == "" || read == last {
		t.Fatalf("%s: no symbol is found at its start", node)
	}
	if err := tab.Close(); err != nil {
		t.Fatal(err)
	}
	if got, ok := tab.Lookup(read.Start); !ok || got != read {
		t.Errorf("after Close, Lookup(%#x) = %+v, %v; want %+v, read before", read.Start, got, ok, read)
	}
	if got, ok := tab.Lookup(last.Start); ok {
		t.Errorf("after Close, Lookup(%#x) = %+v; the name was not read before", last.Start, got)
	}
}
