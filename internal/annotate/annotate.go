// Package annotate lists a function's instructions with the samples that
// landed on each and the source line of each where known, as perf annotate
// does. Jitted code is decoded from the code bytes its dump holds (objdump
// cannot see it); native code from its ELF file.
package annotate

import (
	"bufio"
	"cmp"
	"errors"
	"fmt"
	"github.com/jitprof/jitprof/internal/contract"
	"github.com/jitprof/jitprof/internal/runtimes"
	"io"
	"maps"
	"path/filepath"
	"slices"
	"strings"

	"github.com/jitprof/jitprof/internal/demangle"
	"github.com/jitprof/jitprof/internal/disasm"
	"github.com/jitprof/jitprof/internal/objtool"
)

// Options says how to show the code.
type Options struct {
	Syntax disasm.Syntax
	// Files holds copies of the recording's files (an archive's), or nil.
	Files *contract.Files
}

// Unknown is the name reports give code no symbol names; annotate lists
// the addresses sampled there.
const Unknown = "[unknown]"

// instance is one function at one place: a JIT may load a function several
// times (tiers, or after freeing it), each with code of its own, and may
// inline a function into several others.
type instance struct {
	fn     objtool.Func // the code shown; zero for unnamed code
	named  bool         // fn is set
	name   string       // the function asked for, as reports name it
	module string
	// mapping is the number of the profile's mapping that holds the code:
	// processes that ran the same file each have their own.
	mapping uint32
	// inlined is the SystemName of the function asked for when it was
	// inlined into fn, holder fn's name as reports give it; "" when fn is
	// its own code.
	inlined string
	holder  string
	// samples landed in the function's own code here; holderSamples in
	// all of fn's; onStack counts the samples whose stack held it.
	samples, holderSamples, onStack int64
	at                              map[uint64]int64 // samples by address
}

// Write annotates every instance of the function named symbol in p, a
// profile perfprof made, the most sampled first. symbol is a name jitprof
// report prints (contract.PerfName), the profile's Name or SystemName, with
// or without an inferred frame's suffix, or Unknown. A function inlined
// into others is shown in the code of each, its instructions marked. Its
// code comes from the files its mappings name.
func Write(w io.Writer, p *contract.Profile, symbol string, o Options) error {
	tool := objtool.ForProfiles(o.Files, p)
	defer tool.Close()
	instances, err := find(p, tool, symbol)
	if err != nil {
		return err
	}
	bw := bufio.NewWriter(w)
	for i, in := range instances {
		if i > 0 {
			bw.WriteString("\n")
		}
		if err := in.write(bw, p.PeriodType.Type, o); err != nil {
			return err
		}
	}
	return bw.Flush()
}

// perfName is the name reports give function number id of p, "" for
// none.
func perfName(p *contract.Profile, id uint32) string {
	fn := p.Function(id)
	if fn == nil {
		return ""
	}
	return p.String(p.PerfName(fn))
}

// namesOf returns the numbers of the strings of p that are symbol, as a
// function goes by it: a name without an inferred frame's suffix stands
// for the function whether inferred or not. A function goes by its Name,
// its SystemName and the name reports give it, which is one of the two: it
// goes by symbol when one of the two is one of these. Matching the
// profile's strings once, each once, spares a comparison of a function's
// names for each of its million locations.
func namesOf(p *contract.Profile, symbol string) []uint32 {
	bare := !strings.HasSuffix(symbol, contract.InferredSuffix)
	var ids []uint32
	for id, s := range p.Strings {
		if s != "" && (s == symbol || bare && strings.TrimSuffix(s, contract.InferredSuffix) == symbol) {
			ids = append(ids, uint32(id))
		}
	}
	return ids
}

// unknownModule returns the module an Unknown symbol names ("[unknown]
// (libx.so)", as call graphs print it), "" for any, and whether symbol is
// one.
func unknownModule(symbol string) (string, bool) {
	if symbol == Unknown {
		return "", true
	}
	rest, ok := strings.CutPrefix(symbol, Unknown+" (")
	if !ok || !strings.HasSuffix(rest, ")") {
		return "", false
	}
	return strings.TrimSuffix(rest, ")"), true
}

// fileOf returns the File of mapping m of p, "" for none.
func fileOf(p *contract.Profile, m *contract.Mapping) string {
	if m == nil {
		return ""
	}
	return p.String(m.File)
}

// find gathers the samples of the instances of symbol.
func find(p *contract.Profile, tool *objtool.Tool, symbol string) ([]*instance, error) {
	if len(p.SampleType) == 0 && len(p.Samples) > 0 {
		return nil, errors.New("the profile's samples have no values")
	}
	type key struct {
		mapping uint32 // number
		start   uint64
		inlined uint32 // the inlined function's SystemName, in p.Strings; 0 for own code
	}
	byKey := make(map[key]*instance)
	funcs := make(map[uint32]objtool.Func) // by location number
	funcAt := func(id uint32) (objtool.Func, error) {
		if f, ok := funcs[id]; ok {
			return f, nil
		}
		loc := p.Location(id)
		m := p.Mapping(loc.Mapping)
		if m == nil {
			return objtool.Func{}, fmt.Errorf("no function at %#x: its location has no mapping", loc.Address)
		}
		f, ok, err := tool.FuncIn(p, m, loc.Address)
		if err != nil {
			return f, err
		}
		if !ok {
			return f, fmt.Errorf("%s: no function at %#x", p.String(m.File), loc.Address)
		}
		funcs[id] = f
		return f, nil
	}
	unknownIn, unknown := unknownModule(symbol)
	var named []uint32
	if !unknown {
		named = namesOf(p, symbol)
	}
	var counted []*instance // in this sample's stack, for onStack
	for si := range p.Samples {
		v := p.Value(si)[0]
		counted = counted[:0]
		add := func(in *instance, leaf bool, addr uint64) {
			if leaf {
				in.samples += v
				in.at[addr] += v
			}
			if !slices.Contains(counted, in) {
				counted = append(counted, in)
				in.onStack += v
			}
		}
		for depth, id := range p.Stack(&p.Samples[si]) {
			leaf := depth == 0
			loc := p.Location(id)
			lines := p.LinesOf(loc)
			if len(lines) == 0 {
				module := fileOf(p, p.Mapping(loc.Mapping))
				if !unknown || !leaf || unknownIn != "" && filepath.Base(module) != unknownIn {
					continue
				}
				k := key{mapping: loc.Mapping}
				in := byKey[k]
				if in == nil {
					in = &instance{name: Unknown, module: module, mapping: loc.Mapping, at: make(map[uint64]int64)}
					byKey[k] = in
				}
				add(in, leaf, loc.Address)
				continue
			}
			if len(named) == 0 {
				continue
			}
			holder := lines[len(lines)-1].Function
			for i, ln := range lines {
				fn := p.Function(ln.Function)
				if fn == nil || !slices.Contains(named, fn.Name) && !slices.Contains(named, fn.SystemName) {
					continue
				}
				f, err := funcAt(id)
				if err != nil {
					return nil, err
				}
				k := key{loc.Mapping, f.Start, 0}
				if i < len(lines)-1 {
					k.inlined = fn.SystemName
				}
				in := byKey[k]
				if in == nil {
					in = &instance{fn: f, named: true, name: perfName(p, ln.Function), module: fileOf(p, p.Mapping(loc.Mapping)), mapping: loc.Mapping, at: make(map[uint64]int64)}
					if k.inlined != 0 {
						in.inlined, in.holder = p.String(fn.SystemName), perfName(p, holder)
					}
					byKey[k] = in
				}
				add(in, leaf, loc.Address)
			}
		}
	}
	if len(byKey) == 0 {
		return nil, notFound(p, symbol)
	}
	// The samples of the code that holds an inlined function, for its
	// share of them.
	holders := make(map[uint32][]*instance) // by mapping number
	for k, in := range byKey {
		if k.inlined != 0 {
			holders[k.mapping] = append(holders[k.mapping], in)
		}
	}
	if len(holders) > 0 {
		for si := range p.Samples {
			stack := p.Stack(&p.Samples[si])
			if len(stack) == 0 {
				continue
			}
			loc := p.Location(stack[0])
			for _, in := range holders[loc.Mapping] {
				if in.fn.Start <= loc.Address && loc.Address < in.fn.End {
					in.holderSamples += p.Value(si)[0]
				}
			}
		}
	}
	// Ties go by where their mappings were, then the profile's order of
	// mappings, then the inlined function: the same output however the
	// map above is walked and however the profile numbered its mappings
	// (the unnamed code of several processes running one program differs
	// only in where it was).
	instances := slices.Collect(maps.Values(byKey))
	start := func(in *instance) uint64 {
		if m := p.Mapping(in.mapping); m != nil {
			return m.Start
		}
		return 0
	}
	slices.SortFunc(instances, func(a, b *instance) int {
		return cmp.Or(cmp.Compare(b.samples, a.samples), cmp.Compare(b.onStack, a.onStack),
			strings.Compare(a.module, b.module), cmp.Compare(a.fn.Start, b.fn.Start), strings.Compare(a.holder, b.holder),
			cmp.Compare(start(a), start(b)), cmp.Compare(a.mapping, b.mapping), strings.Compare(a.inlined, b.inlined))
	})
	return instances, nil
}

// closest is how many names the error for an unknown one suggests.
const closest = 5

// notFound is the error for a symbol no sampled function goes by: it
// suggests the closest names that were sampled, saying of an inlined
// function what it was inlined into.
func notFound(p *contract.Profile, symbol string) error {
	type candidate struct {
		name     string
		distance int
		holders  []string // the functions it was inlined into, when never sampled as its own
		own      bool
	}
	// A name is judged by the first function met that reports give it;
	// only those near enough are kept, a few of a million.
	seen := make([]bool, len(p.Strings)) // by the number of a name reports give
	byName := make(map[uint32]*candidate)
	want := strings.ToLower(symbol)
	for li := range p.Locations.Len() {
		lines := p.LinesOf(p.Locations.At(li))
		for i, ln := range lines {
			fn := p.Function(ln.Function)
			if fn == nil {
				continue
			}
			id := p.PerfName(fn)
			name := p.String(id)
			if !seen[id] {
				seen[id] = true
				if d := nearness(p, fn, want); d >= 0 {
					byName[id] = &candidate{name: name, distance: d}
				}
			}
			c := byName[id]
			if c == nil {
				continue
			}
			if i == len(lines)-1 {
				c.own = true
			} else if holder := perfName(p, lines[len(lines)-1].Function); !slices.Contains(c.holders, holder) {
				c.holders = append(c.holders, holder)
			}
		}
	}
	cs := slices.Collect(maps.Values(byName))
	slices.SortFunc(cs, func(a, b *candidate) int {
		return cmp.Or(cmp.Compare(a.distance, b.distance), strings.Compare(a.name, b.name))
	})
	msg := fmt.Sprintf("no sample landed in a function named %q", symbol)
	if len(cs) == 0 {
		return errors.New(msg + " (annotate takes a name jitprof report prints)")
	}
	var near []string
	for _, c := range cs[:min(len(cs), closest)] {
		s := fmt.Sprintf("%q", c.name)
		if !c.own {
			slices.Sort(c.holders)
			s += " (inlined into " + strings.Join(c.holders, ", ") + ")"
		}
		near = append(near, s)
	}
	return fmt.Errorf("%s; the closest sampled names: %s", msg, strings.Join(near, "; "))
}

// nearness is how far want, a symbol in lower case, is from the nearest
// name fn of p goes by (its Name and SystemName; the name reports give is
// one of them), or a V8 function's name alone: 0 when one holds it or it
// holds one, ignoring case, else their edit distance; -1 when too far to
// suggest (more than a third of want's length).
func nearness(p *contract.Profile, fn *contract.Function, want string) int {
	best := -1
	system := p.String(fn.SystemName)
	v8, _ := runtimes.ParseV8Name(strings.TrimSuffix(system, contract.InferredSuffix))
	for _, n := range [...]string{p.String(fn.Name), system, v8.Name} {
		n = strings.ToLower(strings.TrimSuffix(n, contract.InferredSuffix))
		if n == "" {
			continue
		}
		if strings.Contains(n, want) || strings.Contains(want, n) {
			return 0
		}
		if d := editDistance(n, want); d <= len(want)/3 && (best < 0 || d < best) {
			best = d
		}
	}
	return best
}

// editDistance is Levenshtein's distance between a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			sub := prev[j-1]
			if a[i-1] != b[j-1] {
				sub++
			}
			cur[j] = min(sub, prev[j]+1, cur[j-1]+1)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

func (in *instance) write(w *bufio.Writer, event string, o Options) error {
	fn := in.fn
	switch {
	case !in.named:
		fmt.Fprintf(w, "%s  (%s, %d %s samples)\n", in.name, filepath.Base(cmp.Or(in.module, Unknown)), in.samples, event)
		w.WriteString("No symbol names this code: the sampled addresses.\n\n")
		in.writeAddresses(w)
		return nil
	case in.inlined != "":
		fmt.Fprintf(w, "%s inlined into %s  (%s, %#x-%#x, %d %s samples in its code of %d in all)\n",
			in.name, in.holder, filepath.Base(in.module), fn.Start, fn.End, in.samples, event, in.holderSamples)
		how := "as the dump's inline records give them"
		if strings.HasSuffix(in.inlined, contract.InferredSuffix) {
			how = "as jitprof inferred them from the runtime's source positions"
		}
		fmt.Fprintf(w, "Rows marked > are its code, %s; the samples are those of its code.\n", how)
	default:
		fmt.Fprintf(w, "%s  (%s, %#x-%#x, %d %s samples", in.name, filepath.Base(in.module), fn.Start, fn.End, in.samples, event)
		if in.samples == 0 {
			fmt.Fprintf(w, "; on the stack of %d", in.onStack)
		}
		w.WriteString(")\n")
	}
	code, mach, err := fn.Code()
	if errors.Is(err, objtool.ErrNoCode) {
		fmt.Fprintf(w, "%v; the sampled addresses:\n\n", err)
		in.writeAddresses(w)
		return nil
	}
	if err != nil {
		return err
	}
	insts, err := disasm.Decode(mach, fn.Start, code, o.Syntax, nil)
	if err != nil {
		return err
	}
	type row struct {
		mark, pct, count, addr, text, source, inlined string
	}
	rows := make([]row, 0, len(insts))
	var starts []string
	for _, inst := range insts {
		var n int64
		for a := inst.Addr; a < inst.Addr+uint64(inst.Len); a++ {
			n += in.at[a]
		}
		r := row{addr: fmt.Sprintf("%x", inst.Addr), text: inst.Text}
		if n > 0 {
			r.pct, r.count = fmt.Sprintf("%.2f", 100*float64(n)/float64(in.samples)), fmt.Sprint(n)
		}
		if frames := fn.Frames(inst.Addr); len(frames) > 0 {
			leaf := frames[0]
			if leaf.Line != 0 {
				r.source = fmt.Sprintf("%s:%d", filepath.Base(leaf.File), leaf.Line)
			}
			if leaf.AtStart {
				r.source += " (start)"
				if !slices.Contains(starts, leaf.Name) {
					starts = append(starts, leaf.Name)
				}
			}
			if len(frames) > 1 {
				r.inlined = frameName(leaf)
			}
			if in.inlined != "" && slices.ContainsFunc(frames[:len(frames)-1], func(f objtool.Frame) bool { return in.isInlined(f) }) {
				r.mark = ">"
			}
		}
		rows = append(rows, r)
	}
	if len(starts) > 0 {
		fmt.Fprintf(w, "A source ending (start) is where %s starts: the dump gives no line of its script there.\n", strings.Join(starts, ", "))
	}
	w.WriteString("\n")
	marks := in.inlined != ""
	line := func(r row) {
		s := fmt.Sprintf("%8s %8s  %-16s  %-40s  %-24s  %s", r.pct, r.count, r.addr, r.text, r.source, r.inlined)
		if marks {
			s = fmt.Sprintf("%-1s %s", r.mark, s)
		}
		w.WriteString(strings.TrimRight(s, " "))
		w.WriteString("\n")
	}
	line(row{pct: "Percent", count: "Samples", addr: "Address", text: "Instruction", source: "Source", inlined: "Inlined function"})
	for _, r := range rows {
		line(r)
	}
	return nil
}

// isInlined tells whether f is the inlined function in asks for.
func (in *instance) isInlined(f objtool.Frame) bool {
	name := f.Name
	if f.Inferred {
		name += contract.InferredSuffix
	}
	return name == in.inlined
}

// frameName is how pprof names an inlined frame: short, the header names
// the function asked for in full.
func frameName(f objtool.Frame) string {
	name := demangle.Name(f.Name)
	if n, ok := runtimes.ParseV8Name(f.Name); ok && n.Name != "" {
		name = n.Function() // its place is in the Source column
	}
	if f.Inferred {
		name += contract.InferredSuffix
	}
	return name
}

// writeAddresses lists the sampled addresses of code that cannot be shown.
func (in *instance) writeAddresses(w *bufio.Writer) {
	fmt.Fprintf(w, "%8s %8s  %s\n", "Percent", "Samples", "Address")
	for _, a := range slices.Sorted(maps.Keys(in.at)) {
		n := in.at[a]
		fmt.Fprintf(w, "%8.2f %8d  %x\n", 100*float64(n)/float64(in.samples), n, a)
	}
}
