package hotspot

import (
	"bufio"
	"fmt"
	"io"
	"path"
	"strings"
)

// mapped is what a process's memory map tells about it here.
type mapped struct {
	// hotspot: libjvm.so is mapped, and no library of OpenJ9's, whose
	// libjvm.so is a shim and whose attach mechanism is another.
	hotspot bool
	// jitdump: a jit-NSPID.dump is mapped, the marker every jitdump
	// writer (jitprof's agent, perf's libperf-jvmti) maps for perf to
	// find: the JVM already writes a jitdump.
	jitdump string
}

// scanMaps reads a /proc/PID/maps for a process whose own pid is nspid. A
// line's path is everything after the fifth field (it may hold spaces);
// the kernel adds " (deleted)" to a file unlinked since.
func scanMaps(r io.Reader, nspid uint32) (mapped, error) {
	var m mapped
	openj9 := false
	marker := fmt.Sprintf("jit-%d.dump", nspid)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 64<<10) // a path is at most PATH_MAX
	for sc.Scan() {
		p := mapPath(sc.Text())
		if !strings.HasPrefix(p, "/") {
			continue
		}
		p = strings.TrimSuffix(p, " (deleted)")
		switch base := path.Base(p); {
		case base == "libjvm.so":
			m.hotspot = true
		case strings.HasPrefix(base, "libj9vm"):
			openj9 = true
		case base == marker:
			m.jitdump = p
		}
	}
	m.hotspot = m.hotspot && !openj9
	return m, sc.Err()
}

// mapPath returns the path field of a maps line, "" if it has none.
func mapPath(line string) string {
	rest := line
	for range 5 {
		rest = strings.TrimLeft(rest, " ")
		i := strings.IndexByte(rest, ' ')
		if i < 0 {
			return ""
		}
		rest = rest[i:]
	}
	return strings.TrimLeft(rest, " ")
}
