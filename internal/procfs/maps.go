package procfs

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Mapping is one line of /proc/PID/maps.
type Mapping struct {
	Start, End, Pgoff uint64
	Prot, Flags       uint32
	Maj, Min          uint32
	Ino               uint64
	Name              string
}

// Maps reads and parses process pid's maps: a file the kernel makes, as
// long as the process lives, whose every line it writes (a process
// chooses none of its bytes but its files' names). A read error is os's,
// naming the file; a parse error names it too.
func (p FS) Maps(pid uint32) ([]Mapping, error) {
	name := p.Path(pid, "maps")
	b, err := os.ReadFile(name)
	if err != nil {
		return nil, err
	}
	ms, err := ParseMaps(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return ms, nil
}

// ParseMaps reads /proc/PID/maps. Anonymous mappings get perf's name,
// //anon.
func ParseMaps(b []byte) ([]Mapping, error) {
	var ms []Mapping
	for n := 1; len(b) > 0; n++ {
		line := b
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			line, b = b[:i], b[i+1:]
		} else {
			b = nil
		}
		m, err := parseMapsLine(string(line))
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		ms = append(ms, m)
	}
	return ms, nil
}

// parseMapsLine reads `start-end perms offset maj:min inode   name`; the
// name, which may hold spaces, is the rest of the line after the inode.
func parseMapsLine(line string) (Mapping, error) {
	var m Mapping
	bad := func(what string) (Mapping, error) { return m, fmt.Errorf("%q: bad %s", line, what) }
	rest := line
	field := func() string {
		rest = strings.TrimLeft(rest, " ")
		f, r, _ := strings.Cut(rest, " ")
		rest = r
		return f
	}
	addrs, perms, off, dev, ino := field(), field(), field(), field(), field()
	start, end, ok := strings.Cut(addrs, "-")
	var err error
	if m.Start, err = strconv.ParseUint(start, 16, 64); err != nil || !ok {
		return bad("start address")
	}
	if m.End, err = strconv.ParseUint(end, 16, 64); err != nil || m.End < m.Start {
		return bad("end address")
	}
	if len(perms) != 4 {
		return bad("permissions")
	}
	for i, bit := range []uint32{unix.PROT_READ, unix.PROT_WRITE, unix.PROT_EXEC} {
		if perms[i] != '-' {
			m.Prot |= bit
		}
	}
	m.Flags = unix.MAP_PRIVATE
	if perms[3] == 's' {
		m.Flags = unix.MAP_SHARED
	}
	if m.Pgoff, err = strconv.ParseUint(off, 16, 64); err != nil {
		return bad("offset")
	}
	maj, min, ok := strings.Cut(dev, ":")
	majV, err1 := strconv.ParseUint(maj, 16, 32)
	minV, err2 := strconv.ParseUint(min, 16, 32)
	if !ok || err1 != nil || err2 != nil {
		return bad("device")
	}
	m.Maj, m.Min = uint32(majV), uint32(minV)
	if m.Ino, err = strconv.ParseUint(ino, 10, 64); err != nil {
		return bad("inode")
	}
	m.Name = strings.TrimLeft(rest, " ")
	if m.Name == "" {
		m.Name = "//anon"
	}
	return m, nil
}
