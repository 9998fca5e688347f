// Package annotate lists a function's instructions with the samples that
// landed on each and the source line of each where known, as perf annotate
// does. Jitted code is decoded from the code bytes its dump holds (objdump
// cannot see it); native code from its ELF file.
package annotate

import (
	"bufio"
	"cmp"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/jitprof/jitprof/internal/perfprof"
	"github.com/jitprof/jitprof/internal/disasm"
	"github.com/jitprof/jitprof/internal/dumpindex"
	"github.com/jitprof/jitprof/internal/symbolize"
)

// Options says how to show the code.
type Options struct {
	Syntax disasm.Syntax
}

// instance is one function at one place: a JIT may load a function several
// times (tiers, or after freeing it), each with code of its own.
type instance struct {
	frame   symbolize.Frame // any sampled frame of it
	name    string          // demangled
	samples int64
	at      map[uint64]int64 // samples by address
}

// Write annotates every sampled instance of the function named symbol (its
// demangled or raw name), the most sampled first.
func Write(w io.Writer, res *perfprof.Result, symbol string, o Options) error {
	instances, err := find(res, symbol)
	if err != nil {
		return err
	}
	bw := bufio.NewWriter(w)
	for i, in := range instances {
		if i > 0 {
			bw.WriteString("\n")
		}
		if err := in.write(bw, res.Event, o); err != nil {
			return err
		}
	}
	return bw.Flush()
}

// find gathers the self samples of the instances of symbol.
func find(res *perfprof.Result, symbol string) ([]*instance, error) {
	type key struct {
		module *symbolize.Module
		start  uint64
		name   string
	}
	byKey := make(map[key]*instance)
	var near []string // sampled names that contain symbol, for the error
	for _, s := range res.Profile.Sample {
		loc := s.Location[0]
		if len(loc.Line) == 0 {
			continue
		}
		fn := loc.Line[0].Function
		fr := res.Frames[loc.ID-1]
		if fn.Name != symbol && fn.SystemName != symbol {
			if strings.Contains(fn.Name, symbol) && !slices.Contains(near, fn.Name) {
				near = append(near, fn.Name)
			}
			continue
		}
		k := key{fr.Module, fr.Symbol.Start, fr.Symbol.Name}
		in := byKey[k]
		if in == nil {
			in = &instance{frame: fr, name: fn.Name, at: make(map[uint64]int64)}
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
		return cmp.Or(cmp.Compare(b.samples, a.samples), cmp.Compare(a.frame.Symbol.Start, b.frame.Symbol.Start))
	})
	return instances, nil
}

// code returns the instance's machine code and the machine it is for.
func (in *instance) code() ([]byte, elf.Machine, error) {
	sym, m := in.frame.Symbol, in.frame.Module
	if fn := sym.JIT; fn != nil {
		return fn.Code, m.Dump.Machine(), nil
	}
	if m == nil || m.Kind != symbolize.ELF {
		return nil, 0, fmt.Errorf("%s has no code to show: it is not in a dump or an ELF file", in.name)
	}
	file, err := os.Open(m.Name)
	if err != nil {
		return nil, 0, err
	}
	defer file.Close()
	f, err := elf.NewFile(file)
	if err != nil {
		return nil, 0, fmt.Errorf("%s: %w", m.Name, err)
	}
	fi, err := file.Stat()
	if err != nil {
		return nil, 0, err
	}
	off := sym.Start - in.frame.Map.Start + in.frame.Map.Pgoff
	size := sym.End - sym.Start
	if off > uint64(fi.Size()) || size > uint64(fi.Size())-off {
		return nil, 0, fmt.Errorf("%s: %s at file offset %#x, %d bytes, is beyond the file's end", m.Name, in.name, off, size)
	}
	code := make([]byte, size)
	if _, err := file.ReadAt(code, int64(off)); err != nil {
		return nil, 0, fmt.Errorf("%s: %w", m.Name, err)
	}
	return code, f.Machine, nil
}

func (in *instance) write(w *bufio.Writer, event string, o Options) error {
	sym, m := in.frame.Symbol, in.frame.Module
	fmt.Fprintf(w, "%s  (%s, %#x-%#x, %d %s samples)\n\n", in.name, filepath.Base(m.Name), sym.Start, sym.End, in.samples, event)
	code, mach, err := in.code()
	if err != nil {
		return err
	}
	insts, err := disasm.Decode(mach, sym.Start, code, o.Syntax, nil)
	if err != nil {
		return err
	}
	var lines dumpindex.Lines // jitted code only
	if sym.JIT != nil {
		lines = sym.JIT.Lines()
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
		if sym.JIT != nil {
			if file, line, ok := lines.At(sym.LoadAddr(inst.Addr)); ok {
				src = fmt.Sprintf("%s:%d", filepath.Base(file), line)
			}
		}
		row := fmt.Sprintf("%8s %8s  %-16x  %-40s  %s", pct, count, inst.Addr, inst.Text, src)
		w.WriteString(strings.TrimRight(row, " "))
		w.WriteString("\n")
	}
	return nil
}
