package hotspot

import (
	"fmt"
	"path"
	"strings"

	"github.com/jitprof/jitprof/internal/procfs"
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

// scanMaps reads a /proc/PID/maps for a process whose own pid is nspid;
// the kernel adds " (deleted)" to a file unlinked since.
func scanMaps(ms []procfs.Mapping, nspid uint32) mapped {
	var m mapped
	openj9 := false
	marker := fmt.Sprintf("jit-%d.dump", nspid)
	for _, mp := range ms {
		p := strings.TrimSuffix(mp.Name, " (deleted)")
		if !strings.HasPrefix(p, "/") {
			continue
		}
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
	return m
}
