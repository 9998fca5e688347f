// Package otlpprof turns a pprof profile of many processes, as perfprof
// builds it, into OpenTelemetry profiles (the OTLP profiles signal, through
// the collector's pdata model): one resource per process, carrying the
// attributes a backend slices by, its samples' stacks in the shared
// dictionary that OTLP requires.
//
// The conversion is written here because no library maps pprof onto the
// pdata model in this direction with per-process resources; pdata's own
// Set* helpers deduplicate by linear search, which is quadratic in a
// profile's size, so the tables are indexed with maps instead.
package otlpprof

import (
	"fmt"
	"github.com/jitprof/jitprof/internal/contract"
	"maps"
	"slices"
	"time"

	"github.com/google/pprof/profile"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pprofile"
)

// Process is what the resource of a process says about it.
type Process struct {
	Pid         uint32
	Comm        string // the process's name, as the kernel gives it
	Executable  string // the executable's path
	CommandLine string
	ContainerID string
	Runtime     string // a JIT runtime, "nodejs", "java", "erlang"...; "" for none known
}

// Options describe the profile as a whole.
type Options struct {
	Host  string
	Start time.Time // of the window
	// Processes describe the pids of the profile's samples; a pid without
	// an entry gets a resource with its pid only.
	Processes map[uint32]Process
	// SampleTypes are the types of p's values to export (perfprof's
	// "cpu" and "off-cpu" of a wall-clock profile), each as a profile of
	// its own in every process's scope, since an OTLP profile has one
	// sample type; none exports p's first. With several, the first is the
	// sampled event's, of p's period (perfprof's wall-clock profile: cpu),
	// the others have none; a sample is left out of the profiles of the
	// types it has no value of (0).
	SampleTypes []string
}

// Semantic-convention names (OpenTelemetry semconv 1.3x).
const (
	attrHost        = "host.name"
	attrPid         = "process.pid"
	attrExecName    = "process.executable.name"
	attrExecPath    = "process.executable.path"
	attrCommandLine = "process.command_line"
	attrContainerID = "container.id"
	attrRuntime     = "process.runtime.name"
	attrThreadID    = "thread.id"
	attrThreadName  = "thread.name"
	attrFrameType   = "profile.frame.type"
	scopeName       = "jitprof"
)

// frameTypes are profile.frame.type's values for the runtimes' jitted
// frames, by Process.Runtime.
var frameTypes = map[string]string{
	"nodejs": "v8js", "java": "jvm", "erlang": "beam", "php": "php", "python": "cpython", "dotnet": "dotnet",
}

// Convert returns p's samples as OTLP profiles, one resource per pid (the
// "pid" number label perfprof gives every sample); samples without one
// share a resource of the host only. It fails when p lacks one of
// o.SampleTypes.
func Convert(p *profile.Profile, o Options) (pprofile.Profiles, error) {
	out := pprofile.NewProfiles()
	d := newDict(out.Dictionary())
	types, err := valueIndices(p, o.SampleTypes)
	if err != nil {
		return out, err
	}

	byPid := make(map[int64][]*profile.Sample)
	for _, s := range p.Sample {
		pid := int64(-1)
		if v := s.NumLabel["pid"]; len(v) == 1 {
			pid = v[0]
		}
		byPid[pid] = append(byPid[pid], s)
	}
	for _, pid := range slices.Sorted(maps.Keys(byPid)) {
		rp := out.ResourceProfiles().AppendEmpty()
		attrs := rp.Resource().Attributes()
		if o.Host != "" {
			attrs.PutStr(attrHost, o.Host)
		}
		proc := o.Processes[uint32(pid)]
		if pid >= 0 {
			attrs.PutInt(attrPid, pid)
			putNonEmpty(attrs, attrExecName, proc.Comm)
			putNonEmpty(attrs, attrExecPath, proc.Executable)
			putNonEmpty(attrs, attrCommandLine, proc.CommandLine)
			putNonEmpty(attrs, attrContainerID, proc.ContainerID)
			putNonEmpty(attrs, attrRuntime, proc.Runtime)
		}
		sp := rp.ScopeProfiles().AppendEmpty()
		sp.Scope().SetName(scopeName)
		jitType := frameTypes[proc.Runtime]
		frameType := func(m *profile.Mapping) string {
			switch {
			case m == nil:
				return ""
			case contract.KindOf(m) == contract.Kernel:
				return "kernel"
			case contract.IsJIT(m) && jitType != "":
				return jitType
			}
			return "native"
		}
		for i, v := range types {
			pr := sp.Profiles().AppendEmpty()
			vt := profile.ValueType{Type: "samples", Unit: "count"}
			if v < len(p.SampleType) {
				vt = *p.SampleType[v]
			}
			pr.SampleType().SetTypeStrindex(d.str(vt.Type))
			pr.SampleType().SetUnitStrindex(d.str(vt.Unit))
			switch {
			case p.PeriodType != nil && len(types) == 1:
				pr.PeriodType().SetTypeStrindex(d.str(p.PeriodType.Type))
				pr.PeriodType().SetUnitStrindex(d.str(p.PeriodType.Unit))
				pr.SetPeriod(p.Period)
			case i == 0:
				pr.PeriodType().SetTypeStrindex(d.str(vt.Type))
				pr.PeriodType().SetUnitStrindex(d.str(vt.Unit))
				pr.SetPeriod(p.Period)
			}
			pr.SetTime(pcommon.NewTimestampFromTime(o.Start))
			pr.SetDurationNano(uint64(max(p.DurationNanos, 0)))
			for _, s := range byPid[pid] {
				if v >= len(s.Value) || (s.Value[v] == 0 && len(types) > 1) {
					continue
				}
				os := pr.Samples().AppendEmpty()
				os.Values().Append(s.Value[v])
				os.SetStackIndex(d.stack(s.Location, frameType))
				if v := s.NumLabel["tid"]; len(v) == 1 {
					os.AttributeIndices().Append(d.attrInt(attrThreadID, v[0]))
				}
				if v := s.Label["comm"]; len(v) == 1 {
					os.AttributeIndices().Append(d.attrStr(attrThreadName, v[0]))
				}
			}
		}
	}
	return out, nil
}

// valueIndices are the indices in p's values of the types asked for; of
// none, the first.
func valueIndices(p *profile.Profile, types []string) ([]int, error) {
	if len(types) == 0 {
		return []int{0}, nil
	}
	var idx []int
	for _, t := range types {
		i := slices.IndexFunc(p.SampleType, func(vt *profile.ValueType) bool { return vt.Type == t })
		if i < 0 {
			var have []string
			for _, vt := range p.SampleType {
				have = append(have, vt.Type)
			}
			return nil, fmt.Errorf("the profile has no sample type %q, only %v", t, have)
		}
		idx = append(idx, i)
	}
	return idx, nil
}

func putNonEmpty(m pcommon.Map, k, v string) {
	if v != "" {
		m.PutStr(k, v)
	}
}

// dict fills the shared dictionary. Index 0 of every table is the zero
// value, as OTLP requires.
type dict struct {
	d         pprofile.ProfilesDictionary
	strs      map[string]int32
	funcs     map[*profile.Function]int32
	maps      map[*profile.Mapping]int32
	locs      map[locKey]int32
	stacks    map[string]int32
	attrs     map[attrKey]int32
	stackKeys []byte
}

type locKey struct {
	loc       *profile.Location
	frameType string
}

type attrKey struct {
	key string
	str string
	num int64
}

func newDict(d pprofile.ProfilesDictionary) *dict {
	t := &dict{d: d, strs: make(map[string]int32), funcs: make(map[*profile.Function]int32),
		maps: make(map[*profile.Mapping]int32), locs: make(map[locKey]int32), stacks: make(map[string]int32),
		attrs: make(map[attrKey]int32)}
	t.str("")
	d.MappingTable().AppendEmpty()
	d.LocationTable().AppendEmpty()
	d.FunctionTable().AppendEmpty()
	d.LinkTable().AppendEmpty()
	d.AttributeTable().AppendEmpty()
	d.StackTable().AppendEmpty()
	return t
}

func (t *dict) str(s string) int32 {
	if i, ok := t.strs[s]; ok {
		return i
	}
	i := int32(t.d.StringTable().Len())
	t.d.StringTable().Append(s)
	t.strs[s] = i
	return i
}

func (t *dict) attrStr(k, v string) int32 {
	return t.attr(attrKey{key: k, str: v}, func(val pcommon.Value) { val.SetStr(v) })
}

func (t *dict) attrInt(k string, v int64) int32 {
	return t.attr(attrKey{key: k, num: v}, func(val pcommon.Value) { val.SetInt(v) })
}

// attr returns the index of an attribute, set by set the first time.
func (t *dict) attr(key attrKey, set func(pcommon.Value)) int32 {
	if i, ok := t.attrs[key]; ok {
		return i
	}
	i := int32(t.d.AttributeTable().Len())
	a := t.d.AttributeTable().AppendEmpty()
	a.SetKeyStrindex(t.str(key.key))
	set(a.Value())
	t.attrs[key] = i
	return i
}

func (t *dict) function(f *profile.Function) int32 {
	if i, ok := t.funcs[f]; ok {
		return i
	}
	i := int32(t.d.FunctionTable().Len())
	fn := t.d.FunctionTable().AppendEmpty()
	fn.SetNameStrindex(t.str(f.Name))
	fn.SetSystemNameStrindex(t.str(f.SystemName))
	fn.SetFilenameStrindex(t.str(f.Filename))
	fn.SetStartLine(f.StartLine)
	t.funcs[f] = i
	return i
}

func (t *dict) mapping(m *profile.Mapping) int32 {
	if m == nil {
		return 0
	}
	if i, ok := t.maps[m]; ok {
		return i
	}
	i := int32(t.d.MappingTable().Len())
	om := t.d.MappingTable().AppendEmpty()
	om.SetMemoryStart(m.Start)
	om.SetMemoryLimit(m.Limit)
	om.SetFileOffset(m.Offset)
	om.SetFilenameStrindex(t.str(m.File))
	if m.BuildID != "" {
		om.AttributeIndices().Append(t.attrStr("process.executable.build_id.gnu", m.BuildID))
	}
	t.maps[m] = i
	return i
}

func (t *dict) location(l *profile.Location, frameType func(*profile.Mapping) string) int32 {
	key := locKey{l, frameType(l.Mapping)}
	if i, ok := t.locs[key]; ok {
		return i
	}
	i := int32(t.d.LocationTable().Len())
	ol := t.d.LocationTable().AppendEmpty()
	ol.SetMappingIndex(t.mapping(l.Mapping))
	ol.SetAddress(l.Address)
	for _, ln := range l.Line {
		ol2 := ol.Lines().AppendEmpty()
		ol2.SetFunctionIndex(t.function(ln.Function))
		ol2.SetLine(ln.Line)
		ol2.SetColumn(ln.Column)
	}
	if key.frameType != "" {
		ol.AttributeIndices().Append(t.attrStr(attrFrameType, key.frameType))
	}
	t.locs[key] = i
	return i
}

// stack returns the index of a stack, leaf first as pprof and OTLP both
// order them.
func (t *dict) stack(locs []*profile.Location, frameType func(*profile.Mapping) string) int32 {
	ids := make([]int32, len(locs))
	t.stackKeys = t.stackKeys[:0]
	for j, l := range locs {
		ids[j] = t.location(l, frameType)
		v := uint32(ids[j])
		t.stackKeys = append(t.stackKeys, byte(v), byte(v>>8), byte(v>>16), byte(v>>24))
	}
	if i, ok := t.stacks[string(t.stackKeys)]; ok {
		return i
	}
	i := int32(t.d.StackTable().Len())
	t.d.StackTable().AppendEmpty().LocationIndices().FromRaw(ids)
	t.stacks[string(t.stackKeys)] = i
	return i
}
