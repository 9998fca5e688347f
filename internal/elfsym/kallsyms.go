package elfsym

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
)

// ReadKallsyms reads a file in the format of /proc/kallsyms.
func ReadKallsyms(path string) (*Table, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	t, err := ParseKallsyms(f)
	if err != nil {
		return nil, fmt.Errorf("elfsym: %s: %w", path, err)
	}
	t.path = path
	return t, nil
}

// ksymNameLen is the longest symbol name perf reads (KSYM_NAME_LEN).
const ksymNameLen = 512

// ParseKallsyms reads kallsyms lines, "address type name[\t[module]]",
// keeping the symbols perf keeps (kallsyms__parse and
// map__process_kallsym_symbol): text (t, T, w, W) and data (d, D, b, B)
// symbols, except ARM's "$" mapping symbols. Symbols at address 0, which
// is what the kernel shows to a reader without the right to see
// addresses, are left out. Symbols have no sizes: each ends where the
// next begins, but the last of the kernel or of a module only takes the
// rest of its page and the next.
func ParseKallsyms(r io.Reader) (*Table, error) {
	// Reading it all first tells how many symbols there are and how much
	// room their names take.
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	lines := bytes.Count(data, []byte("\n")) + 1
	b := newBuilder(lines)
	// A line holds 16 digits of address and 3 more bytes besides its
	// name, which goes to the arena with a NUL.
	b.arena = make([]byte, 0, max(len(data)-18*lines, 0))
	defer b.finishTree()
	b.treeLater = true
	modules := make(map[string]uint16)
	added := make([]rec, 0, cap(b.info))
	for len(data) > 0 {
		line := data
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i], data[i+1:]
		} else {
			data = nil
		}
		addr, n := parseHex(line)
		if n == 0 || n+3 > len(line) || line[n] != ' ' || line[n+2] != ' ' {
			continue
		}
		typ, name := line[n+1], line[n+3:]
		var module []byte
		if i := bytes.IndexByte(name, '\t'); i >= 0 {
			name, module = name[:i], name[i+1:]
		}
		if len(name) > ksymNameLen {
			name = name[:ksymNameLen]
		}
		if addr == 0 || !kallsymsType(typ) || len(name) > 0 && name[0] == '$' {
			continue
		}
		added = b.add(added, describe(name, b.keep(name), kallsymsBind(typ), kallsymsElfType(typ)), addr, addr)
		if len(module) > 0 {
			m, ok := modules[string(module)]
			if !ok {
				if len(b.modules) > 0xffff {
					return nil, errors.New("too many modules")
				}
				m = uint16(len(b.modules))
				b.modules = append(b.modules, string(module))
				modules[string(module)] = m
			}
			for len(b.moduleOf) < len(b.info) {
				b.moduleOf = append(b.moduleOf, 0)
			}
			b.moduleOf[len(b.info)-1] = m
		}
	}
	b.insert(added)
	b.fixupEnd(true)
	b.fixupDuplicate()
	// perf then moves each symbol, in address order, into the tree of
	// the map that holds it; here that is one tree. It is only needed
	// where symbols overlap, which they seldom do once their ends are
	// fixed up.
	for k := 1; k < len(b.order); k++ {
		if b.order[k].start < reach(b.order[k-1].start, b.order[k-1].end) {
			b.treeLater = false
			for _, r := range b.order {
				b.op(treeOp{r.start, r.id})
			}
			break
		}
	}
	return b.table("kallsyms", nil), nil
}

// parseHex reads a hexadecimal number at the start of b, returning it
// and the number of digits.
func parseHex(b []byte) (uint64, int) {
	var v uint64
	n := 0
	for ; n < len(b); n++ {
		c := b[n]
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return v, n
		}
		v = v<<4 | uint64(c)
	}
	return v, n
}

// kallsymsType is perf 6.1's symbol_type__filter.
func kallsymsType(t byte) bool {
	switch t | 0x20 { // lower case
	case 't', 'w', 'd', 'b':
		return true
	}
	return false
}

func kallsymsBind(t byte) uint8 {
	switch {
	case t == 'W':
		return bindWeak
	case 'A' <= t && t <= 'Z':
		return bindGlobal
	}
	return bindLocal
}

func kallsymsElfType(t byte) uint8 {
	if t|0x20 == 't' || t|0x20 == 'w' {
		return typeFunc
	}
	return typeObject
}

// Kernel reads the recorded kernel's symbols: those of copy, a copy of its
// /proc/kallsyms, else the running kernel's when it is the recorded one
// (running says so); nil without an error when neither is at hand.
func Kernel(copy string, running bool) (*Table, error) {
	switch {
	case copy != "":
		return ReadKallsyms(copy)
	case running:
		return ReadKallsyms("/proc/kallsyms")
	}
	return nil, nil
}
