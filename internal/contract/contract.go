// Package contract holds what a jitprof profile means, between the analysis
// that writes it (perfprof) and everything that reads it: the renderers,
// objtool, archive, the agent's export and the tests. The profile is a
// pprof profile, held in columns (Profile); its Mappings say what holds
// each location's code:
//
//   - an ELF file placed at [Start, Limit) from file offset Offset, with its
//     build-id when the recording gave one;
//   - a jitted function's code: BuildID JITBuildID, File the dump's path,
//     [Start, Limit) the function's place, Offset its code_index;
//   - a perf map's entries: File the map's path, perf-<pid>.map (IsPerfMap);
//   - the kernel (KernelFile) and the vDSO (VDSOFile);
//   - OffCPUFile: the frames an off-CPU or wall-clock profile adds that
//     stand for no code (PreemptedFrame, a stack's end).
//
// Its Functions are named as names.go says, and an inlined frame that the
// runtime did not record but jitprof worked out ends with InferredSuffix.
package contract

import (
	"os"
	"path/filepath"
	"regexp"
	"sync"

	"github.com/google/pprof/profile"

	"github.com/jitprof/jitprof/internal/foreign"
)

// The names of a profile's mappings that are not files.
const (
	// JITBuildID is the BuildID of the Mappings of jitted code, whose File
	// is the dump's path: pprof must not look for such a file's symbols or
	// disassemble it with objdump.
	JITBuildID = "jitdump"
	KernelFile = "[kernel.kallsyms]"
	VDSOFile   = "[vdso]"
	// OffCPUFile holds no code: nothing is to be read from it.
	OffCPUFile = "[off-cpu]"
)

// InferredSuffix ends the name of an inlined frame that the runtime did not
// record but jitprof worked out from source positions (V8's), in every
// output, so that it is never taken for the runtime's word. SystemName
// carries it too: the runtime gave no name of its own for such a frame.
const InferredSuffix = " [inferred]"

// InterpretedSuffix ends the name of a Java method that a frame of HotSpot's
// interpreter runs, named from the frame (the runtime's name, demangled as
// a compiled method's is, then the mark), so that it is told from the same
// method's compiled code.
const InterpretedSuffix = " [interpreted]"

// Kind is what a Mapping holds.
type Kind int

const (
	File    Kind = iota // an ELF file
	JIT                 // a jitted function, described by a dump
	PerfMap             // a perf map's entries
	Kernel
	VDSO
	OffCPU // frames that stand for time off the CPU, not for code
)

// KindOf tells what m holds.
func KindOf(m *profile.Mapping) Kind {
	if m == nil {
		return File
	}
	return kindOf(m.File, m.BuildID)
}

// kindOf tells what a mapping of file with buildID holds.
func kindOf(file, buildID string) Kind {
	switch {
	case buildID == JITBuildID:
		return JIT
	case IsPerfMap(file):
		return PerfMap
	case file == KernelFile:
		return Kernel
	case file == VDSOFile:
		return VDSO
	case file == OffCPUFile:
		return OffCPU
	}
	return File
}

// IsJIT tells whether m holds jitted code: a dump's function, or a perf
// map's, which runtimes write for their jitted code too.
func IsJIT(m *profile.Mapping) bool { return KindOf(m).IsJIT() }

// IsJIT tells whether a mapping of kind k holds jitted code (see IsJIT).
func (k Kind) IsJIT() bool { return k == JIT || k == PerfMap }

// perfMapName is how perf tells a perf map: perf-<pid>.map.
var perfMapName = regexp.MustCompile(`^perf-[0-9]+\.map$`)

// IsPerfMap tells whether a Mapping's File is a perf map's.
func IsPerfMap(file string) bool { return perfMapName.MatchString(filepath.Base(file)) }

// Files are copies of a recording's files, as an archive brings them to
// another machine: each at Root+its recorded path, the recorded kernel's
// symbols in Kallsyms (a /proc/kallsyms) and its vDSO in VDSO; the
// kernel's are used whatever kernel runs here. Empty fields stand for
// copies not made; a nil *Files for none. The analysis adds the files it
// read elsewhere than at their path (ReadElsewhere), for what reads their
// code after it.
type Files struct {
	Root, Kallsyms, VDSO string

	mu        sync.Mutex
	elsewhere map[elsewhereKey]elsewhere
}

type elsewhereKey struct{ path, buildID string }

type elsewhere struct {
	at        foreign.Path
	ambiguous bool // found in two roots: a build-id can be forged
}

// ReadElsewhere says that the file recorded at path, whose build-id is
// buildID (hex), was found at p: in the root of the running process that
// mapped it, a container's. The build-id tells it from another file at the
// same path in another container; found in the roots of two, it is read in
// neither, since either container can have made its file's build-id the
// other's.
func (f *Files) ReadElsewhere(path, buildID string, p foreign.Path) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.elsewhere == nil {
		f.elsewhere = make(map[elsewhereKey]elsewhere)
	}
	key := elsewhereKey{path, buildID}
	if e, ok := f.elsewhere[key]; ok && e.at.Rules.Root != p.Rules.Root {
		f.elsewhere[key] = elsewhere{ambiguous: true}
		return
	}
	f.elsewhere[key] = elsewhere{at: p}
}

// Place returns where to read the file recorded at path whose build-id is
// buildID (hex, "" when unknown): where the analysis found it elsewhere,
// else its copy, else the path.
func (f *Files) Place(path, buildID string) foreign.Path {
	if f != nil && buildID != "" {
		f.mu.Lock()
		e, ok := f.elsewhere[elsewhereKey{path, buildID}]
		f.mu.Unlock()
		if ok && !e.ambiguous {
			return e.at
		}
	}
	return foreign.Plain(f.Path(path))
}

// Path returns where to read the file recorded at path: its copy when there
// is one.
func (f *Files) Path(path string) string {
	if f != nil && f.Root != "" {
		c := filepath.Join(f.Root, path)
		if fi, err := os.Stat(c); err == nil && fi.Mode().IsRegular() {
			return c
		}
	}
	return path
}

// The sample types of time on and off the CPU, which the off-CPU and
// wall-clock profiles carry (perfprof's views) and the HTML timeline reads.
const (
	CPUType    = "cpu"
	OffCPUType = "off-cpu"
)

// PreemptedFrame ends the stacks of the time off the CPU that a thread
// spent runnable, preempted, waiting for a CPU rather than for something
// to happen: the timeline tells it from being blocked.
const PreemptedFrame = "[off-cpu: preempted, runnable]"

// A timeline profile (perfprof.Options.Timeline) splits each thread's
// samples by when they were taken: every sample carries the numeric labels
// SlotLabel, the index of its time slot counted from the recording's
// first, and SlotWidthLabel, the slots' width in nanoseconds, the same for
// all. A blocked interval that spans slots is split across them by time.
// Time slots rather than times keep the profile's size bounded: a few
// hundred slots per distinct stack at most.
const (
	SlotLabel      = "timeslot"
	SlotWidthLabel = "timeslot_ns"
)
