package gmon

import (
	"bufio"
	"fmt"
	"io"
	"strings"
)

// WriteAssembler writes the layout as a GNU assembler file in the style of
// Kaffe's kaffe-jit-symbols.s: one global function symbol per function at
// its offset in the synthetic text, followed by a local NAME_end marker
// where its code ends. Assembled and linked at the text's address it gives
// the symbols WriteELF writes:
//
//	as kaffe-jit-symbols.s -o syms.o && ld -Ttext=0x100000 -e 0 -o syms syms.o
//
// The assembler allows a name only once, so a function incarnation whose
// name an earlier one had is written with " #N" appended, N counting from 2.
// Each symbol is preceded by a comment telling where the code really was.
func (p *Program) WriteAssembler(w io.Writer, l *Layout) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "# Symbols of the functions jitprof laid out for gprof (%d functions), in the\n", len(p.Symbols))
	fmt.Fprintf(bw, "# style of Kaffe's kaffe-jit-symbols.s. Each function has its own range of a\n")
	fmt.Fprintf(bw, "# synthetic text at %#x, which the histogram in gmon.out uses:\n", l.TextStart)
	fmt.Fprintf(bw, "#   as FILE.s -o FILE.o && ld -Ttext=%#x -e 0 -o FILE FILE.o && gprof FILE gmon.out\n", l.TextStart)
	fmt.Fprintf(bw, "\t.text\n")
	seen := make(map[string]int)
	symbol := func(name string, start, end uint64) {
		seen[name]++
		if n := seen[name]; n > 1 {
			name = fmt.Sprintf("%s #%d", name, n)
		}
		q := quoteSymbol(name)
		qEnd := quoteSymbol(name + "_end")
		fmt.Fprintf(bw, "\t.org\t%#x\n\t.globl\t%s\n\t.type\t%s, @function\n%s:\n", start-l.TextStart, q, q, q)
		fmt.Fprintf(bw, "\t.org\t%#x\n%s:\n\t.size\t%s, %#x\n", end-l.TextStart, qEnd, q, end-start)
	}
	fmt.Fprintf(bw, "\n# samples outside any known code\n")
	symbol(UnaccountedName, l.Unaccounted, l.Unaccounted+binBytes)
	for i, f := range p.Symbols {
		fmt.Fprintf(bw, "\n# %s\n", comment(f))
		symbol(f.Name, l.Start[i], l.End[i])
	}
	fmt.Fprintf(bw, "\n\t.globl\t%s\n%s:\n", endName, endName)
	return bw.Flush()
}

// comment tells where a function really was, on one line.
func comment(f Symbol) string {
	s := fmt.Sprintf("%d bytes at %#x", f.Size, f.Addr)
	if f.CodeIndex != 0 {
		s += fmt.Sprintf(", code_index %d", f.CodeIndex)
	}
	if f.Module != "" {
		s += " in " + f.Module
	}
	return strings.Map(func(r rune) rune {
		if r < ' ' {
			return '?'
		}
		return r
	}, s)
}

// quoteSymbol quotes a name for GNU as, which takes any name in double
// quotes with backslash escapes; control characters, which it cannot take,
// become '?'.
func quoteSymbol(name string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range name {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < ' ' || r == 0x7f:
			b.WriteByte('?')
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}
