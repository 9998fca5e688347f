package perfprof

import (
	"cmp"
	"encoding/hex"
	"hash/maphash"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"

	"github.com/jitprof/jitprof/internal/arena"
	"github.com/jitprof/jitprof/internal/contract"
	"github.com/jitprof/jitprof/internal/demangle"
	"github.com/jitprof/jitprof/internal/dumpindex"
	"github.com/jitprof/jitprof/internal/idindex"
	"github.com/jitprof/jitprof/internal/symbolize"
)

// collect and freeOSMemory are runtime.GC and debug.FreeOSMemory, which
// FuzzRun skips: each costs a small analysis more than the analysis does.
var collect, freeOSMemory = runtime.GC, debug.FreeOSMemory

// result builds the profile: a Mapping per mapped ELF file (per place it
// was mapped at), per place of a jitted function, and per perf map and the
// kernel, with every Has* flag set since the profile is complete and pprof
// must not re-symbolize it. When last, the address spaces are closed once
// its locations are built (other aggregators of the same spaces need them
// until then).
func (a *aggregator) result(last bool) (*Result, error) {
	if a.off != nil {
		a.settle()
	}
	// What only the lookups needed goes before the profile takes room.
	a.locIDs, a.fnIDs, a.lookups, a.dumpIDs = idindex.Index{}, idindex.Index{}, nil, nil
	a.stackTab.ids, a.stacks.ids = idindex.Index{}, idindex.Index{}
	sampleTypes, defaultType := a.sampleTypes()
	p := &contract.Profile{
		SampleType:        sampleTypes,
		DefaultSampleType: defaultType,
		PeriodType:        contract.ValueType{Type: a.event, Unit: a.unit},
		Period:            int64(a.period),
	}
	if a.kept > 0 {
		p.DurationNanos = int64(a.last - a.first)
	}
	res := &Result{
		Profile: p, Event: a.event, Dumps: dumpPaths(a.space),
		Samples: a.samples, Kept: a.kept, Jitted: a.jitted, Lost: a.lost, Malformed: a.malformed, Cut: a.cut, Unwound: a.unwound, CutShort: a.cutShort,
		Stripped: a.stripped(), Last: a.last,
	}
	res.PerfMapped, res.Unnamed, res.Waiting = a.unnamed()
	exe := a.mainExecutable()
	if last {
		// Nothing is looked up any more: the regions of the address
		// spaces (a million at a million functions) go before the
		// profile takes room.
		a.space.Forget()
	}
	// What went is collected before the profile's columns are made (100
	// MB at once at a million functions): a collection under way when it
	// went would keep it through them (a million functions' report then
	// peaked at 438 MB, 341 otherwise).
	collect()
	// The samples first: their table (48 bytes a distinct sample) goes
	// before the locations take room.
	a.samplesOf(p)

	strs := newStringTable(len(a.fns))
	a.locations(p, strs)
	putMainFirst(p, strs, exe)
	p.Strings = strs.list
	// The space goes from the aggregator before the memory is given
	// back: while the aggregator held it, its dumps' index (44 MB of
	// 500,000 functions) outlived the collection FreeOSMemory makes.
	space := a.space
	a.space = nil
	var err error
	if last {
		err = space.Close()
		// The symbol tables were the larger part of the heap: give
		// their memory back now, or the report would be built on top
		// of it.
		freeOSMemory()
	}
	return res, err
}

// A stringTable numbers a profile's strings, each once, as
// contract.Profile holds them, copied into blocks (symbol names and a
// dump's records alias files that Close unmaps) but those it is told to
// keep.
type stringTable struct {
	list  []string // "" first
	ids   idindex.Index
	seed  maphash.Seed
	names arena.Strings
}

// newStringTable makes a table with room for n strings, more as they come.
// A profile has about a string a function: room for them from the start
// spares the list its doubling, up to twice the room it needs.
func newStringTable(n int) *stringTable {
	return &stringTable{list: append(make([]string, 0, n+64), ""), ids: idindex.New(n), seed: maphash.MakeSeed()}
}

// id returns the number of s, a new one the first time.
func (t *stringTable) id(s string) uint32 { return t.add(s, false) }

// kept is id of a string the table need not copy: one that stays valid
// when the dumps and symbol tables close, as a Dump's names do (its own
// copies). A million jitted functions' names are then not held twice; a
// block of the Dump's names stays while the profile uses any of them,
// which keeps at most the names the Dump held anyway.
func (t *stringTable) kept(s string) uint32 { return t.add(s, true) }

func (t *stringTable) add(s string, kept bool) uint32 {
	if s == "" {
		return 0
	}
	h := maphash.String(t.seed, s)
	id, i := t.ids.Find(h, func(id uint32) bool { return t.list[id] == s })
	if id != 0 {
		return id
	}
	if !kept {
		s = t.names.Clone(s)
	}
	t.list = append(grown(t.list, 1), s)
	id = uint32(len(t.list) - 1)
	t.ids.Add(i, id, h, func(id uint32) uint64 { return maphash.String(t.seed, t.list[id]) })
	return id
}

// locations builds p's locations, one per location of the aggregator, with
// their mappings and functions, and drops the aggregator's record of them.
func (a *aggregator) locations(p *contract.Profile, strs *stringTable) {
	// Mappings and functions are found again by their keys through
	// indexes that hold, for each, what made it (keyRef), whose frame
	// gives the key back, and the top half of its key's hash, which spares
	// making the frames of the others met on the way: a map of the keys,
	// or a list of them, cost 30 to 100 bytes a function at a million
	// functions (a jitted function has a mapping of its own).
	type mappingKey struct {
		module       *symbolize.Module
		start, pgoff uint64 // ELF files and the vDSO: the mapping's; jitted code: the function's place and code_index
	}
	mappingKeyOf := func(fr symbolize.Frame) mappingKey {
		key := mappingKey{module: fr.Module}
		switch {
		case fr.Symbol.JIT != nil:
			key.start, key.pgoff = fr.Symbol.Start, fr.Symbol.JIT.CodeIndex
		case fr.Module.Kind == symbolize.ELF || fr.Module.Kind == symbolize.VDSO:
			key.start, key.pgoff = fr.Map.Start, fr.Map.Pgoff
		}
		return key
	}
	mappings := idindex.New(0)
	seed := maphash.MakeSeed()
	ownMappings := 0 // the jitted functions'
	for _, f := range a.fns {
		if f.flags&jittedCode != 0 {
			ownMappings++
		}
	}
	p.Mappings = make([]contract.Mapping, 0, ownMappings+64)
	mappingMade := make([]made, 0, cap(p.Mappings)) // by place in p.Mappings
	jitBuildID := strs.id(contract.JITBuildID)
	mappingOf := func(ref uint32, fr symbolize.Frame) uint32 {
		if fr.Module == nil {
			return 0
		}
		key := mappingKeyOf(fr)
		h := maphash.Comparable(seed, key)
		id, i := mappings.Find(h, func(id uint32) bool {
			m := mappingMade[id-1]
			return m.is(h) && mappingKeyOf(a.keyFrame(m.ref)) == key
		})
		if id == 0 {
			m := contract.Mapping{
				File: strs.id(fr.Module.Name), Start: fr.Addr, Limit: fr.Addr + 1,
				HasFunctions: true, HasFilenames: true, HasLineNumbers: true, HasInlineFrames: true,
			}
			switch {
			case fr.Symbol.JIT != nil:
				m.Start, m.Limit, m.Offset, m.BuildID = fr.Symbol.Start, fr.Symbol.End, fr.Symbol.JIT.CodeIndex, jitBuildID
			case key.start != 0:
				m.Start, m.Limit, m.Offset = fr.Map.Start, fr.Map.End, fr.Map.Pgoff
			}
			if id := fr.Module.FileBuildID(); id != nil {
				m.BuildID = strs.id(hex.EncodeToString(id))
			}
			p.Mappings = append(grown(p.Mappings, 1), m)
			mappingMade = append(grown(mappingMade, 1), madeBy(ref, h))
			id = uint32(len(p.Mappings))
			mappings.Add(i, id, h, func(id uint32) uint64 { return mappingMade[id-1].hash() })
		}
		if key.start == 0 {
			m := &p.Mappings[id-1]
			m.Start, m.Limit = min(m.Start, fr.Addr), max(m.Limit, fr.Addr+1)
		}
		return id
	}

	p.Functions = make([]contract.Function, 0, len(a.fns))
	addFunction := func(raw, demangled string, jitted, kept bool) (uint32, int32) {
		fn, col := newFunction(raw, demangled, jitted, kept, strs)
		p.Functions = append(grown(p.Functions, 1), fn)
		return uint32(len(p.Functions)), col
	}
	// A location's function is its aggregator function's, but per
	// function the aggregator tells apart the chains inlined into one
	// function, which share its profile Function.
	type functionKey struct {
		module *symbolize.Module
		name   string
		start  uint64
	}
	functionKeyOf := func(fr symbolize.Frame) functionKey { return functionKey{fr.Module, fr.Symbol.Name, fr.Symbol.Start} }
	// Only per function, and only when it told apart chains inlined into
	// a function, are several of the aggregator's functions one of the
	// profile's; else each is its own, with no index to find it by.
	merging := a.perFunction && slices.ContainsFunc(a.others, func(o other) bool { return o.inlined != "" })
	var functions idindex.Index
	if merging {
		functions = idindex.New(0)
	}
	var functionMade []made // by place in p.Functions; of those functions finds
	byAggregated := make([]uint32, len(a.fns))
	startColumns := make(map[uint32]int32)             // of the functions whose name gives one
	lines := make(map[*dumpindex.Code]dumpindex.Lines) // built once per function with lines, not per location
	type inlineKey struct {
		module     *symbolize.Module
		name, file string
		inferred   bool
	}
	inlines := make(map[inlineKey]uint32)
	inlined := func(m *symbolize.Module, in dumpindex.InlineFrame) uint32 {
		key := inlineKey{m, in.Name, in.File, in.Inferred}
		id := inlines[key]
		if id == 0 {
			id, _ = addFunction(in.Name, demangle.Name(in.Name), true, false)
			fn := &p.Functions[id-1]
			if in.Inferred {
				fn.Name = strs.id(strs.list[fn.Name] + contract.InferredSuffix)
				fn.SystemName = strs.id(strs.list[fn.SystemName] + contract.InferredSuffix)
			}
			if fn.Filename == 0 {
				fn.Filename = strs.id(in.File)
			}
			inlines[key] = id
		}
		return id
	}
	// Locations of one function at one line share their Line: a profile of
	// deep distinct stacks has millions of addresses in a few hundred
	// thousand functions, 16 bytes a line. sharedLine remembers the last
	// lone line each function made (its place + 1), and is needed only
	// where some function has more than one location.
	var sharedLine []uint32
	if a.locs.Len() > len(a.fns) {
		sharedLine = make([]uint32, len(a.fns))
	}
	p.Lines = make([]contract.Line, 0, len(a.fns))
	for i := range a.locs.Len() {
		if i%arena.ListChunk == 0 {
			// The locations made are read no more (keyRef): their
			// arrays go as the profile's take room.
			a.locs.dropBefore(i)
		}
		fr := a.frame(uint32(i))
		ref := a.keyRef(uint32(i))
		loc := contract.Location{Mapping: mappingOf(ref, fr), Address: fr.Addr, Line: uint32(len(p.Lines))}
		if fr.Symbol.Name == "" {
			p.Locations.Add(loc)
			continue
		}
		var file string
		var line uint32
		if jit := fr.Symbol.JIT; jit != nil && jit.Debug() != nil {
			l, ok := lines[jit]
			if !ok {
				l = jit.Lines()
				lines[jit] = l
			}
			if file, line, ok = l.At(fr.Symbol.LoadAddr(fr.Addr)); !ok && len(l) > 0 {
				file = l[0].File // code before the first line is still in the function's file
			}
		}
		ours := a.locs.at(i)
		agg, whole := ours.fn, ours.whole
		id := byAggregated[agg]
		if id == 0 {
			var key functionKey
			var h uint64
			slot := 0
			if merging {
				key = functionKeyOf(fr)
				h = maphash.Comparable(seed, key)
				id, slot = functions.Find(h, func(id uint32) bool {
					m := functionMade[id-1]
					return m.is(h) && functionKeyOf(a.keyFrame(m.ref)) == key
				})
			}
			if id == 0 {
				jitted := fr.Symbol.JIT != nil || fr.Module.Kind == symbolize.PerfMap
				var col int32
				// A dump's function's names are the Dump's copy, or
				// demangled from it.
				id, col = addFunction(fr.Symbol.Name, a.name(agg), jitted, fr.Symbol.JIT != nil)
				if col != 0 {
					startColumns[id] = col
				}
				if merging {
					for len(functionMade) < len(p.Functions) { // inlined functions have none
						functionMade = append(grown(functionMade, 1), made{})
					}
					functionMade[id-1] = madeBy(ref, h)
					functions.Add(slot, id, h, func(id uint32) uint64 { return functionMade[id-1].hash() })
				}
			}
			byAggregated[agg] = id
		}
		fn := &p.Functions[id-1]
		if fn.Filename == 0 {
			fn.Filename = strs.id(file)
		}
		// pprof lists a location's inlined functions innermost first, the
		// function that holds the code last.
		chain := a.inlineChain(fr)
		for _, in := range slices.Backward(chain) {
			l := contract.Line{Function: inlined(fr.Module, in), Line: int64(in.Line)}
			if whole {
				l.Line = 0
			}
			p.Lines = append(grown(p.Lines, 1), l)
		}
		fn = &p.Functions[id-1]
		ln := contract.Line{Function: id, Line: int64(line)}
		if whole {
			ln.Line = 0 // the location stands for every line of the function
		} else if fn.StartLine != 0 && (ln.Line == 0 || file != strs.list[fn.Filename]) {
			// Without a line of the function's own file (none, one of
			// code inlined from elsewhere, or the garbage node 20
			// writes for some Sparkplug code) the place the runtime
			// named is all that is known of the code: its start.
			ln.Line, ln.Column = fn.StartLine, startColumns[id]
		}
		loc.NLines = uint32(len(chain) + 1)
		if sharedLine != nil && len(chain) == 0 {
			if at := sharedLine[agg]; at != 0 && p.Lines[at-1] == ln {
				loc.Line = at - 1
				p.Locations.Add(loc)
				continue
			}
			sharedLine[agg] = uint32(len(p.Lines)) + 1
		}
		p.Lines = append(grown(p.Lines, 1), ln)
		p.Locations.Add(loc)
	}
	a.locs, a.fns, a.oddFrames, a.others, a.dumps = locationList{}, nil, nil, nil, nil
}

// made is what made a mapping or function of the profile (a keyRef), and
// the top half of the hash of their key: enough for an index, whose slot
// for a hash is in its top bits.
type made struct{ ref, top uint32 }

func madeBy(ref uint32, h uint64) made { return made{ref, uint32(h >> 32)} }

// oddRef marks a keyRef that is a location's number, not its function's.
const oddRef = 1 << 31

// keyRef returns what gives the mapping and function keys of location
// i back once the aggregator's record of it is gone: its function, whose
// frame is the location's but for the address, or, for a location whose
// frame differs from its function's (oddFrames, which stay), its number.
func (a *aggregator) keyRef(i uint32) uint32 {
	if _, odd := a.oddFrames[i]; odd {
		return i | oddRef
	}
	return a.locs.at(int(i)).fn
}

// keyFrame returns the frame keyRef ref stands for, without its address.
func (a *aggregator) keyFrame(ref uint32) symbolize.Frame {
	if ref&oddRef != 0 {
		return a.oddFrames[ref&^oddRef]
	}
	return a.fnFrame(ref)
}

// is tells whether a key of hash h may be m's.
func (m made) is(h uint64) bool { return m.top == uint32(h>>32) }

// hash returns the hash of m's key, as far as an index looks.
func (m made) hash() uint64 { return uint64(m.top) << 32 }

// samplesOf builds p's samples, one per distinct sample of the aggregator,
// and drops the aggregator's record of them. The samples' stacks are the
// stack table's own array.
func (a *aggregator) samplesOf(p *contract.Profile) {
	all := &a.stacks.entries
	a.stacks = nil
	// Samples of one thread (and time slot) share their labels.
	labelsOf := make(map[[4]uint32]uint32)
	n := len(p.SampleType)
	p.Samples = make([]contract.Sample, all.Len())
	p.Values = make([]int64, all.Len()*n)
	// The most frequent first, then in an order of their keys, so that
	// the output is the same from run to run.
	order := func(x, y sampleEntry) int {
		return cmp.Or(cmp.Compare(y.tot.count, x.tot.count),
			cmp.Compare(x.key.pid, y.key.pid), cmp.Compare(x.key.tid, y.key.tid), cmp.Compare(x.key.comm, y.key.comm),
			cmp.Compare(x.key.stack, y.key.stack), cmp.Compare(x.key.slot, y.key.slot))
	}
	i := 0
	for d := range all.Sorted(order) {
		k := d.key
		th := [4]uint32{k.pid, k.tid, k.comm, k.slot}
		labels, ok := labelsOf[th]
		if !ok {
			p.LabelSets = append(p.LabelSets, contract.LabelSet{
				Str: []contract.Label{{Key: "comm", Value: a.comms[k.comm]}},
				Num: a.numLabels(k),
			})
			labels = uint32(len(p.LabelSets))
			labelsOf[th] = labels
		}
		s := &p.Samples[i]
		s.Labels = labels
		s.Stack, s.Depth = a.stackTab.place(k.stack)
		a.values(p.Values[i*n:i*n], d.tot)
		i++
	}
	p.Stacks = a.stackTab.frames
	a.stackTab = nil
}

// putMainFirst puts the program's executable first among p's mappings,
// where pprof looks for the profiled program (its web UI's header names
// it, its merge keeps it first, and the first mapping is otherwise
// whatever was sampled first: often ld.so or a dump). The program is the
// process with the most samples, and its executable the file it mapped
// first (see symbolize.Space.Files), the loader aside, or the first named
// like the process (its main thread's name, perf's comm, which an exec
// sets to the file's name cut to 15 bytes): java's launcher, never
// sampled, as well as node. An executable never sampled gets a mapping of
// its own, which no location uses.
func putMainFirst(p *contract.Profile, strs *stringTable, exe symbolize.Frame) {
	if exe.Module == nil {
		return
	}
	var buildID string
	if id := exe.Module.FileBuildID(); id != nil {
		buildID = hex.EncodeToString(id)
	}
	file, build := strs.id(exe.Module.Name), strs.id(buildID)
	i := slices.IndexFunc(p.Mappings, func(m contract.Mapping) bool {
		return m.File == file && m.BuildID == build && m.Start == exe.Map.Start && m.Offset == exe.Map.Pgoff
	})
	if i < 0 {
		p.Mappings = append(p.Mappings, contract.Mapping{
			File: file, BuildID: build, Start: exe.Map.Start, Limit: exe.Map.End, Offset: exe.Map.Pgoff,
			HasFunctions: true, HasFilenames: true, HasLineNumbers: true, HasInlineFrames: true,
		})
		i = len(p.Mappings) - 1
	}
	main := p.Mappings[i]
	copy(p.Mappings[1:i+1], p.Mappings[:i])
	p.Mappings[0] = main
	// Mapping i+1 is now 1, and those before it one further.
	moved := uint32(i + 1)
	for _, l := range p.Locations.All() {
		switch m := &l.Mapping; {
		case *m == moved:
			*m = 1
		case *m != 0 && *m < moved:
			*m++
		}
	}
}

// mainExecutable returns the mapping of the program's executable, for
// putMainFirst; a frame without a Module when there is none.
func (a *aggregator) mainExecutable() symbolize.Frame {
	perPid := make(map[uint32]int64)
	for _, e := range a.stacks.entries.All() {
		perPid[e.key.pid] += e.tot.count
	}
	var pid uint32
	best := int64(-1)
	for q, n := range perPid {
		if n > best || (n == best && q < pid) {
			pid, best = q, n
		}
	}
	if best < 0 {
		return symbolize.Frame{}
	}
	files := slices.DeleteFunc(a.space.Files(pid, a.last), func(f symbolize.Frame) bool { return isLoader(f.Module.Name) })
	if len(files) == 0 {
		return symbolize.Frame{}
	}
	comm := a.space.Comm(pid, a.last)
	exe := files[0]
	if i := slices.IndexFunc(files, func(f symbolize.Frame) bool { return namedLike(f.Module.Name, comm) }); i >= 0 {
		exe = files[i]
	}
	return exe
}

// isLoader tells whether file is the dynamic loader (ld-linux-x86-64.so.2,
// ld-musl-x86_64.so.1, ld.so), which a recording maps into every process.
func isLoader(file string) bool {
	base := filepath.Base(file)
	return strings.HasPrefix(base, "ld-") || strings.HasPrefix(base, "ld.so")
}

// namedLike tells whether file is named comm, a thread name the kernel
// cuts to 15 bytes.
func namedLike(file, comm string) bool {
	const commLen = 15 // TASK_COMM_LEN less the NUL
	base := filepath.Base(file)
	return comm != "" && (base == comm || (len(comm) == commLen && strings.HasPrefix(base, comm)))
}

// newFunction returns the profile Function of a function named raw by its
// source (demangled: perf report's name). A jitted function whose name
// embeds its source file is split as pprof expects (names.go); newFunction
// then also returns the column its name gives.
func newFunction(raw, demangled string, jitted, kept bool, strs *stringTable) (contract.Function, int32) {
	id := strs.id
	if kept {
		id = strs.kept
	}
	fn := contract.Function{SystemName: id(raw), Name: id(demangled)}
	if !jitted || demangled != raw {
		return fn, 0
	}
	sn, ok := contract.SplitName(raw)
	if !ok {
		return fn, 0
	}
	fn.Name, fn.Filename, fn.StartLine = id(sn.Name), id(sn.File), sn.Line
	return fn, contract.ColumnOf(sn.Column)
}

// stripped counts, by stripped ELF file, the kept samples whose leaf it
// holds unnamed.
func (a *aggregator) stripped() []Stripped {
	counts := make(map[string]int)
	for _, e := range a.stacks.entries.All() {
		k, tot := e.key, e.tot
		fr := a.frame(a.stackTab.leaf(k.stack) - 1)
		if fr.Symbol.Name == "" && fr.Module != nil && fr.Module.Stripped() {
			counts[fr.Module.Name] += int(tot.count)
		}
	}
	var out []Stripped
	for path, n := range counts {
		out = append(out, Stripped{path, n})
	}
	slices.SortFunc(out, func(x, y Stripped) int { return cmp.Or(cmp.Compare(y.Samples, x.Samples), cmp.Compare(x.Path, y.Path)) })
	return out
}

// unnamed counts the kept samples a perf map names, and finds the
// processes most of whose samples, and at least minUnnamed of them, landed
// in anonymous memory nothing describes, and those with a dump a tenth of
// whose samples landed in code the dump does not describe.
func (a *aggregator) unnamed() (perfMapped int, procs, waiting []Unnamed) {
	type counts struct {
		kept, anon, nowhere, perfMapped int
		comm                            int
	}
	byPid := make(map[uint32]*counts)
	for _, e := range a.stacks.entries.All() {
		k, tot := e.key, e.tot
		c := byPid[k.pid]
		if c == nil {
			c = &counts{comm: int(k.comm)}
			byPid[k.pid] = c
		}
		c.kept += int(tot.count)
		fr := a.frame(a.stackTab.leaf(k.stack) - 1)
		switch {
		case fr.Module == nil:
			c.nowhere += int(tot.count)
		case fr.Module.Kind == symbolize.PerfMap:
			perfMapped += int(tot.count)
			c.perfMapped += int(tot.count)
		case fr.Symbol.Name == "" && fr.Module.Kind == symbolize.Anon:
			c.anon += int(tot.count)
		}
	}
	// A process with a dump has samples in anonymous memory, or in code
	// nothing held once the dump replaced its anonymous mappings, when its
	// dump does not (yet) describe that code.
	described := make(map[uint32]bool)
	for _, m := range a.space.Dumps() {
		described[m.Dump.Pid] = true
	}
	for pid, c := range byPid {
		u := Unnamed{Pid: pid, Comm: a.comms[c.comm], Kept: c.kept, Samples: c.anon + c.nowhere, PerfMapped: c.perfMapped > 0}
		switch {
		case described[pid] && u.Samples >= minUnnamed && 10*u.Samples > c.kept:
			waiting = append(waiting, u)
		case !described[pid] && c.anon >= minUnnamed && 2*c.anon > c.kept:
			u.Samples = c.anon
			procs = append(procs, u)
		}
	}
	order := func(x, y Unnamed) int { return cmp.Or(cmp.Compare(y.Samples, x.Samples), cmp.Compare(x.Pid, y.Pid)) }
	slices.SortFunc(procs, order)
	slices.SortFunc(waiting, order)
	return perfMapped, procs, waiting
}

// minUnnamed is the fewest samples in anonymous memory that make a process
// worth a hint: fewer are a runtime's trampolines, not its JIT.
const minUnnamed = 20

// dumpPaths returns the paths of the dumps in use in space.
func dumpPaths(space *symbolize.Space) []string {
	var paths []string
	for _, m := range space.Dumps() {
		paths = append(paths, m.Name)
	}
	return paths
}
