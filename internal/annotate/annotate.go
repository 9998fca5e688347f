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
	"io"
	"maps"
	"path/filepath"
	"slices"
	"strings"

	"github.com/google/pprof/profile"
	"github.com/jitprof/jitprof/internal/disasm"
	"github.com/jitprof/jitprof/internal/objtool"
	"github.com/jitprof/jitprof/internal/perfprof"
	"github.com/jitprof/jitprof/internal/symbolize"
)

// Options says how to show the code.
type Options struct {
	Syntax disasm.Syntax
	// Files holds copies of the recording's files (an archive's), or nil.
	Files *symbolize.Files
}

// instance is one function at one place: a JIT may load a function several
// times (tiers, or after freeing it), each with code of its own.
type instance struct {
	fn      objtool.Func
	name    string // demangled
	module  string
	samples int64
	at      map[uint64]int64 // samples by address
}

// Write annotates every sampled instance of the function named symbol (its
// demangled or raw name) in p, a profile perfprof made, the most sampled
// first; its code comes from the files its mappings name.
func Write(w io.Writer, p *profile.Profile, symbol string, o Options) error {
	tool := objtool.New(o.Files, p)
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

// find gathers the self samples of the instances of symbol.
func find(p *profile.Profile, tool *objtool.Tool, symbol string) ([]*instance, error) {
	type key struct {
		mapping *profile.Mapping
		start   uint64
		name    string
	}
	byKey := make(map[key]*instance)
	var near []string // sampled names that contain symbol, for the error
	for _, s := range p.Sample {
		loc := s.Location[0]
		if len(loc.Line) == 0 {
			continue
		}
		fn := loc.Line[len(loc.Line)-1].Function // the function that holds the code, not a method inlined into it
		name := perfprof.PerfName(fn)
		if name != symbol && fn.SystemName != symbol {
			if strings.Contains(name, symbol) && !slices.Contains(near, name) {
				near = append(near, name)
			}
			continue
		}
		f, ok, err := tool.FuncAt(loc.Mapping, loc.Address)
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, fmt.Errorf("%s: no function at %#x", loc.Mapping.File, loc.Address)
		}
		k := key{loc.Mapping, f.Start, f.Name}
		in := byKey[k]
		if in == nil {
			in = &instance{fn: f, name: name, module: loc.Mapping.File, at: make(map[uint64]int64)}
			byKey[k] = in
		}
		in.samples += s.Value[0]
		in.at[loc.Address] += s.Value[0]
	}
	if len(byKey) == 0 {
		msg := fmt.Sprintf("no sample landed in a function named %q", symbol)
		if len(near) > 0 {
			slices.Sort(near)
			if len(near) > 10 {
				near = append(near[:10], "...")
			}
			msg += "; sampled functions with that in their name: " + strings.Join(near, ", ")
		}
		return nil, errors.New(msg)
	}
	instances := slices.Collect(maps.Values(byKey))
	slices.SortFunc(instances, func(a, b *instance) int {
		return cmp.Or(cmp.Compare(b.samples, a.samples), cmp.Compare(a.fn.Start, b.fn.Start))
	})
	return instances, nil
}

func (in *instance) write(w *bufio.Writer, event string, o Options) error {
	fn := in.fn
	fmt.Fprintf(w, "%s  (%s, %#x-%#x, %d %s samples)\n\n", in.name, filepath.Base(in.module), fn.Start, fn.End, in.samples, event)
	code, mach, err := fn.Code()
	if err != nil {
		return err
	}
	insts, err := disasm.Decode(mach, fn.Start, code, o.Syntax, nil)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "%8s %8s  %-16s  %-40s  %s\n", "Percent", "Samples", "Address", "Instruction", "Source")
	for _, inst := range insts {
		var n int64
		for a := inst.Addr; a < inst.Addr+uint64(inst.Len); a++ {
			n += in.at[a]
		}
		pct, count := "", ""
		if n > 0 {
			pct, count = fmt.Sprintf("%.2f", 100*float64(n)/float64(in.samples)), fmt.Sprint(n)
		}
		src := ""
		if file, line, ok := fn.Line(inst.Addr); ok {
			src = fmt.Sprintf("%s:%d", filepath.Base(file), line)
		}
		row := fmt.Sprintf("%8s %8s  %-16x  %-40s  %s", pct, count, inst.Addr, inst.Text, src)
		w.WriteString(strings.TrimRight(row, " "))
		w.WriteString("\n")
	}
	return nil
}
