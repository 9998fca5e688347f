package unwind

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/arch/x86/x86asm"

	"github.com/jitprof/jitprof/internal/dumpindex"
	"github.com/jitprof/jitprof/internal/elfsym"
	"github.com/jitprof/jitprof/internal/fixtures"
	"github.com/jitprof/jitprof/jitelf"
)

// The UNWINDING_INFO CPython 3.13 writes for its -X perf_jit trampolines
// compiles, and its rule at every instruction is the one the trampoline's
// own code implies: the CFA is rsp + 8 + what the instructions before it
// pushed (sub/add rsp, push/pop), the return address just below the CFA.
// The same bytes, put into an ELF image by jitelf as perf inject does, read
// the same through OpenELF and equal readelf's rows.
func TestCPythonTrampolines(t *testing.T) {
	d, err := dumpindex.Read(fixtures.Dump(t, fixtures.Python))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	var checked, insts int
	var image []jitelf.Function
	for _, fn := range d.Functions {
		if fn.Unwind() == nil {
			continue
		}
		tab, err := FromUnwindingInfo(fn.Unwind(), fn.CodeAddr, fn.CodeSize)
		if err != nil {
			t.Fatalf("%s: %v", fn.Name, err)
		}
		if err := tab.Err(); err != nil {
			t.Errorf("%s: %v", fn.Name, err)
		}
		want := spRules(t, fn.Code(), fn.CodeAddr)
		for pc, w := range want {
			if got, ok := tab.Lookup(pc); !ok || got != w {
				t.Errorf("%s at +%d: Lookup = %v, %v; the code says %v", fn.Name, pc-fn.CodeAddr, got, ok, w)
			}
		}
		if r, ok := tab.Lookup(fn.CodeAddr + fn.CodeSize); ok {
			t.Errorf("%s: a rule after the code: %v", fn.Name, r)
		}
		checked++
		insts += len(want)
		if len(image) < 3 {
			image = append(image, jitelf.Function{Name: fn.Name, Code: fn.Code(), CodeAddr: fn.CodeAddr, Unwind: fn.Unwind()})
		}
	}
	if checked == 0 {
		t.Fatal("the dump has no UNWINDING_INFO")
	}
	t.Logf("%d trampolines, %d instructions: rules equal the code's", checked, insts)

	checkImages(t, image)
}

// checkImages puts each function into an ELF image of its own, as perf
// inject writes them, and checks that OpenELF reads the image as
// FromUnwindingInfo reads the dump, and that both equal readelf's rows of
// the image.
func checkImages(t *testing.T, fns []jitelf.Function) {
	readelf := fixtures.LookPath(t, "readelf")
	for _, fn := range fns {
		var buf bytes.Buffer
		lay, err := jitelf.Write(&buf, jitelf.Options{}, []jitelf.Function{fn})
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(t.TempDir(), "jitted.so")
		if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		tab, err := OpenELF(path, elfsym.Recorded{BuildID: lay.BuildID[:]}, nil)
		if err != nil {
			t.Fatal(err)
		}
		jit, err := FromUnwindingInfo(fn.Unwind, fn.CodeAddr, uint64(len(fn.Code)))
		if err != nil {
			t.Fatal(err)
		}
		for off := range uint64(len(fn.Code)) {
			a, _ := tab.Lookup(lay.Offsets[0] + off)
			b, _ := jit.Lookup(fn.CodeAddr + off)
			if a != b {
				t.Errorf("%s+%d: the image's rule %v, the dump's %v", fn.Name, off, a, b)
			}
		}
		out, err := exec.Command(readelf, "--debug-dump=frames-interp", "-W", path).Output()
		if err != nil {
			t.Fatal(err)
		}
		fdes := parseReadelf(t, out, nil)
		rows, bad := compareReadelf(tab, fdes, path)
		for _, m := range bad {
			t.Error(m)
		}
		if rows == 0 {
			t.Errorf("%s: readelf shows no rows", fn.Name)
		}
	}
}

// node --perf-prof-unwinding-info writes an UNWINDING_INFO for every code
// object: each compiles (builtins without tables give ErrNoCFI), and the
// first three of each kind, in images, equal readelf's rows.
func TestV8UnwindingInfo(t *testing.T) {
	node := fixtures.LookPath(t, "node")
	dir := t.TempDir()
	cmd := exec.Command(node, "--perf-prof", "--perf-prof-unwinding-info", fixtures.Workload(t, "newfunctions.js"))
	cmd.Dir = dir // node writes ./jit-<pid>.dump
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("node: %v\n%s", err, out)
	}
	dumps, _ := filepath.Glob(filepath.Join(dir, "jit-*.dump"))
	if len(dumps) != 1 {
		t.Fatalf("node wrote dumps %q", dumps)
	}
	d, err := dumpindex.Read(dumps[0])
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	var tables, none int
	kinds := map[string]int{}
	var image []jitelf.Function
	for _, fn := range d.Functions {
		if fn.Unwind() == nil {
			continue
		}
		tab, err := FromUnwindingInfo(fn.Unwind(), fn.CodeAddr, fn.CodeSize)
		if errors.Is(err, ErrNoCFI) {
			none++
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", fn.Name, err)
		}
		if err := tab.Err(); err != nil {
			t.Errorf("%s: %v", fn.Name, err)
		}
		tables++
		// The kind: "JS:*", "JS:^", "Builtin:", ...
		kind, _, _ := strings.Cut(fn.Name, " ")
		if len(kind) > 4 {
			kind = kind[:4]
		}
		if kinds[kind] < 3 {
			kinds[kind]++
			image = append(image, jitelf.Function{Name: fn.Name, Code: fn.Code(), CodeAddr: fn.CodeAddr, Unwind: fn.Unwind()})
		}
	}
	t.Logf("%d functions with tables, %d without; %d images of %d kinds", tables, none, len(image), len(kinds))
	if tables == 0 {
		t.Fatal("no function has unwinding tables")
	}
	checkImages(t, image)
}

// spRules derives, from the instructions of code at addr, the rule at each
// instruction of a function that keeps no frame pointer: the CFA is rsp
// plus 8 plus what the instructions before it pushed. An instruction that
// moves rsp otherwise fails the test: the code's truth is then unknown.
func spRules(t *testing.T, code []byte, addr uint64) map[uint64]Rule {
	rules := map[uint64]Rule{}
	depth := int64(8)
	for off := 0; off < len(code); {
		inst, err := x86asm.Decode(code[off:], 64)
		if err != nil {
			t.Fatalf("code at %#x+%d: %v", addr, off, err)
		}
		rules[addr+uint64(off)] = Rule{Kind: KindSP, CFAOff: int32(depth), RAOff: -8}
		rsp := inst.Args[0] == x86asm.RSP
		switch {
		case inst.Op == x86asm.PUSH:
			depth += 8
		case inst.Op == x86asm.POP:
			depth -= 8
		case inst.Op == x86asm.SUB && rsp:
			depth += int64(inst.Args[1].(x86asm.Imm))
		case inst.Op == x86asm.ADD && rsp:
			depth -= int64(inst.Args[1].(x86asm.Imm))
		case inst.Op == x86asm.RET, inst.Op == x86asm.CALL, inst.Op == x86asm.NOP, inst.Op == x86asm.JMP:
		case rsp:
			t.Fatalf("code at %#x+%d: %v moves rsp in a way this test does not follow", addr, off, inst)
		}
		off += inst.Len
	}
	return rules
}
