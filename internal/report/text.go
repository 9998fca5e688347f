package report

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/jitprof/jitprof/internal/contract"
)

// Text writes p to w as perf report --stdio does with -n and, when o has no
// Sort, --sort comm,dso,sym: a header with the number of samples and the
// event, then one line per entry with its share, its number of samples and
// its keys, in columns headed Overhead (Children and Self with o.Children),
// Samples, Command, Pid:Command, Shared Object and Symbol. A symbol reads
// "[k] name" in the kernel and "[.] name" elsewhere, as in perf.
//
// With o.CallGraph, each entry is followed by its call graph, laid out as
// perf's graph mode does. A chain of frames that carry the same value shares
// a branch, and a tree with a single trunk starts with it, after "---":
//
//	# Samples: 100  of event 'cpu-clock'
//	# Event count (approx.): 111400000
//	#
//	# Overhead  Samples  Command  Shared Object      Symbol
//	# ........  .......  .......  .................  .................
//	#
//	    30.00%       30  sh       libc.so.6          [.] strlen
//	            |
//	            ---strlen
//	               evaltree
//	               main
//
//	    24.00%       24  seq      libc.so.6          [.] memcmp
//	            |
//	            ---memcmp
//	               |
//	               |--20.00%--Main.loop
//	               |          Interpreter::run
//	               |
//	                --4.00%--Interpreter::run
//
// Lines end without the spaces perf pads some with.
func Text(w io.Writer, p *contract.Profile, o Options) error {
	t, err := aggregate(p, o)
	if err != nil {
		return err
	}
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "# Samples: %d  of event '%s'\n", t.count, t.event)
	if t.period {
		fmt.Fprintf(bw, "# Event count (approx.): %d\n", t.periods)
	}
	bw.WriteString("#\n")

	cols := t.columns()
	const lastUnderline = 60
	bw.WriteString("# ")
	for i, c := range cols {
		if i > 0 {
			bw.WriteString("  ")
		}
		c.pad(bw, []byte(c.header), i == len(cols)-1)
	}
	bw.WriteString("\n# ")
	for i, c := range cols {
		width := c.width
		if i > 0 {
			bw.WriteString("  ")
		}
		if i == len(cols)-1 {
			// Nothing follows the last column: a C++ template name
			// hundreds of characters long need not be underlined.
			width = min(width, max(len(c.header), lastUnderline))
		}
		bw.WriteString(strings.Repeat(".", width))
	}
	bw.WriteString("\n#\n")

	// Call graphs hang under the first column, as in perf.
	g := graphWriter{t: t, w: bw, margin: strings.Repeat(" ", 2+cols[0].width+2)}
	var cell []byte
	for _, e := range t.entries {
		for j, c := range cols {
			bw.WriteString("  ")
			cell = c.cell(cell[:0], e)
			c.pad(bw, cell, j == len(cols)-1)
		}
		bw.WriteString("\n")
		if e.root >= 0 {
			g.write(e)
		}
	}
	return bw.Flush()
}

// A column's cells are formatted twice, to measure them and to write them,
// rather than kept: a profile of a million functions has a million lines.
type column struct {
	header string
	right  bool // numbers align right
	width  int
	cell   func(b []byte, e *entry) []byte // appends e's cell to b
}

// pad writes s aligned in the column. The last column has no padding to
// the right, which would only leave spaces at the end of lines.
func (c *column) pad(w *bufio.Writer, s []byte, last bool) {
	n := c.width - utf8.RuneCount(s)
	switch {
	case c.right:
		writeSpaces(w, n)
		w.Write(s)
	case last:
		w.Write(s)
	default:
		w.Write(s)
		writeSpaces(w, n)
	}
}

const spaces = "                                "

func writeSpaces(w *bufio.Writer, n int) {
	for ; n > len(spaces); n -= len(spaces) {
		w.WriteString(spaces)
	}
	w.WriteString(spaces[:max(n, 0)])
}

func (t *table) columns() []*column {
	var cols []*column
	var b []byte
	add := func(header string, right bool, cell func([]byte, *entry) []byte) *column {
		c := &column{header: header, right: right, width: len(header), cell: cell}
		for _, e := range t.entries {
			b = cell(b[:0], e)
			c.width = max(c.width, utf8.RuneCount(b))
		}
		cols = append(cols, c)
		return c
	}
	// Percentages take at least perf's width for them, so that Self lines
	// up as perf prints it.
	pct := func(header string, v func(*entry) int64) {
		c := add(header, true, func(b []byte, e *entry) []byte {
			return append(strconv.AppendFloat(b, percent(v(e), t.total), 'f', 2, 64), '%')
		})
		c.width = max(c.width, len("100.00%")+1)
	}
	if t.children {
		pct("Children", func(e *entry) int64 { return e.children })
		pct("Self", func(e *entry) int64 { return e.self })
	} else {
		pct("Overhead", func(e *entry) int64 { return e.self })
	}
	add("Samples", true, func(b []byte, e *entry) []byte { return strconv.AppendInt(b, e.samples, 10) })
	for _, k := range t.keys {
		switch k {
		case byComm:
			add("Command", false, func(b []byte, e *entry) []byte { return append(b, t.comms[e.comm]...) })
		case byPID:
			add("Pid:Command", false, func(b []byte, e *entry) []byte {
				return append(append(strconv.AppendInt(b, e.pid, 10), ':'), t.comms[e.comm]...)
			})
		case byModule:
			add("Shared Object", false, func(b []byte, e *entry) []byte { return append(b, t.module(&t.frames[e.frame])...) })
		case bySymbol:
			add("Symbol", false, func(b []byte, e *entry) []byte {
				f := &t.frames[e.frame]
				if f.kernel {
					return append(append(b, "[k] "...), t.name(f)...)
				}
				return append(append(b, "[.] "...), t.name(f)...)
			})
		}
	}
	return cols
}

// A graphWriter prints call graphs in the layout of perf's graph mode.
type graphWriter struct {
	t      *table
	w      *bufio.Writer
	margin string
	line   []byte
}

// write prints the call graph of e, if any of it is above the limit.
func (g *graphWriter) write(e *entry) {
	gr := &g.t.graph
	first, end := gr.children(e.root)
	if first == end {
		return
	}
	margin := g.margin
	if end-first == 1 && gr.nodes[first].value == gr.nodes[e.root].value {
		// A tree with one trunk starts with it, without the percentage,
		// which is the entry's.
		g.w.WriteString(margin + "|\n" + margin + "---" + g.name(first) + "\n")
		g.margin += "   "
		first, end = g.chain(first, nil)
	}
	g.branches(first, end, []bool{true})
	g.margin = margin
	g.w.WriteString("\n")
}

// branches prints nodes first to end at depth len(mask). mask tells for
// each depth whether its line continues below, to more siblings.
func (g *graphWriter) branches(first, end int32, mask []bool) {
	d := len(mask)
	for c := first; c < end; c++ {
		g.levels(mask)
		g.line = trimRight(g.line)
		g.flush()
		if c == end-1 {
			mask[d-1] = false
		}
		g.levels(mask[:d-1])
		g.bar(mask[d-1])
		g.line = append(g.line, "--"...)
		g.line = strconv.AppendFloat(g.line, percent(g.t.graph.nodes[c].value, g.t.total), 'f', 2, 64)
		g.line = append(g.line, "%--"...)
		g.line = append(g.line, g.name(c)...)
		g.flush()
		from, to := g.chain(c, mask)
		g.branches(from, to, append(mask, true))
	}
}

// chain prints the frames below n that carry all of its value and returns
// the children of the last of them.
func (g *graphWriter) chain(n int32, mask []bool) (first, end int32) {
	gr := &g.t.graph
	for {
		first, end = gr.children(n)
		if end-first != 1 || gr.nodes[first].value != gr.nodes[n].value {
			return first, end
		}
		n = first
		g.levels(mask)
		g.line = append(g.line, g.name(n)...)
		g.flush()
	}
}

func (g *graphWriter) levels(mask []bool) {
	for _, m := range mask {
		g.bar(m)
		g.line = append(g.line, "          "...)
	}
}

func (g *graphWriter) bar(m bool) {
	if m {
		g.line = append(g.line, '|')
	} else {
		g.line = append(g.line, ' ')
	}
}

func (g *graphWriter) flush() {
	g.w.WriteString(g.margin)
	g.w.Write(g.line)
	g.w.WriteString("\n")
	g.line = g.line[:0]
}

func trimRight(b []byte) []byte {
	for len(b) > 0 && b[len(b)-1] == ' ' {
		b = b[:len(b)-1]
	}
	return b
}

// name names the frame of node n, with the module if it did not resolve.
func (g *graphWriter) name(n int32) string {
	f := &g.t.frames[g.t.graph.nodes[n].frame]
	if module := g.t.module(f); !f.resolved() && module != unknown {
		return unknown + " (" + module + ")"
	}
	return g.t.name(f)
}
