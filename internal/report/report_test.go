package report

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/pprof/profile"
	"github.com/jitprof/jitprof/internal/contract"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// Modules of the test profiles, named as jitprof's profiles name them.
const (
	dash    = "/usr/bin/dash"
	libc    = "/usr/lib/x86_64-linux-gnu/libc.so.6"
	kernel  = "[kernel.kallsyms]"
	jit     = "/tmp/jit-200.dump"
	perfMap = "/tmp/perf-300.map"
)

// A profBuilder makes profiles the way internal/perfprof builds them.
type profBuilder struct {
	p     *profile.Profile
	maps  map[string]*profile.Mapping
	funcs map[string]*profile.Function
	locs  map[string]*profile.Location
}

func newProfBuilder() *profBuilder {
	return &profBuilder{
		p: &profile.Profile{
			SampleType: []*profile.ValueType{
				{Type: "samples", Unit: "count"},
				{Type: "cpu-clock", Unit: "nanoseconds"},
			},
			DefaultSampleType: "samples",
		},
		maps:  make(map[string]*profile.Mapping),
		funcs: make(map[string]*profile.Function),
		locs:  make(map[string]*profile.Location),
	}
}

// add adds a sample of count samples and the given period. Frames are
// "module:symbol", root first; the symbol "?" is an address of its own
// that did not resolve, "symbol@file" gives the source file, and
// "leaf|mid|fn" is a location of fn with mid and leaf inlined, lines
// innermost first as pprof has them.
func (b *profBuilder) add(comm string, pid, count, period int64, frames ...string) *profBuilder {
	s := &profile.Sample{
		Value:    []int64{count, period},
		Label:    map[string][]string{"comm": {comm}},
		NumLabel: map[string][]int64{"pid": {pid}, "tid": {pid}},
	}
	for _, f := range slices.Backward(frames) {
		s.Location = append(s.Location, b.location(f))
	}
	b.p.Sample = append(b.p.Sample, s)
	return b
}

func (b *profBuilder) location(spec string) *profile.Location {
	if l, ok := b.locs[spec]; ok {
		return l
	}
	module, sym, _ := strings.Cut(spec, ":")
	m := b.maps[module]
	if m == nil {
		m = &profile.Mapping{ID: uint64(len(b.p.Mapping) + 1), File: module}
		if strings.HasSuffix(module, ".dump") {
			m.BuildID = "jitdump"
		}
		b.maps[module] = m
		b.p.Mapping = append(b.p.Mapping, m)
	}
	l := &profile.Location{ID: uint64(len(b.p.Location) + 1), Mapping: m, Address: uint64(0x1000 * (len(b.p.Location) + 1))}
	b.p.Location = append(b.p.Location, l)
	if sym == "?" {
		return l
	}
	for _, sym := range strings.Split(sym, "|") {
		name, file, _ := strings.Cut(sym, "@")
		fn := b.funcs[name]
		if fn == nil {
			fn = &profile.Function{ID: uint64(len(b.p.Function) + 1), Name: name, SystemName: name, Filename: file}
			b.funcs[name] = fn
			b.p.Function = append(b.p.Function, fn)
		}
		l.Line = append(l.Line, profile.Line{Function: fn, Line: 1})
	}
	b.locs[spec] = l
	return l
}

// TestInlinedLines: each line of a location is a frame, the last the
// caller of the others, in every output that shows stacks.
func TestInlinedLines(t *testing.T) {
	p := newProfBuilder().
		add("vm", 1, 3, 0, jit+":main", jit+":leaf@leaf.src|mid@mid.src|root@root.src").
		add("vm", 1, 2, 0, jit+":main", jit+":mid@mid.src|root@root.src", libc+":memcmp").
		add("vm", 1, 1, 0, jit+":main", jit+":root@root.src").
		p
	var b bytes.Buffer
	if err := Folded(&b, contract.FromPProf(p), Options{CommRoot: true}); err != nil {
		t.Fatal(err)
	}
	if got, want := b.String(), "vm;main;root 1\nvm;main;root;mid;leaf 3\nvm;main;root;mid;memcmp 2\n"; got != want {
		t.Errorf("folded:\n%s\nwant\n%s", got, want)
	}
	r := decode(t, p, Options{Children: true, CallGraph: true, Sort: []string{"symbol"}})
	got := map[string][2]int64{}
	for _, e := range r.Entries {
		got[e.Symbol] = [2]int64{e.Self, *e.Children}
	}
	want := map[string][2]int64{"leaf": {3, 3}, "mid": {0, 5}, "root": {1, 6}, "main": {0, 6}, "memcmp": {2, 2}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("self and children by symbol: %v, want %v", got, want)
	}
	r = decode(t, p, Options{CallGraph: true, Sort: []string{"symbol"}})
	for _, e := range r.Entries {
		if e.Symbol != "leaf" {
			continue
		}
		var chain []string
		for n := e.Callers; len(n) > 0; n = n[0].Callers {
			chain = append(chain, n[0].Symbol+"@"+n[0].File)
		}
		if want := []string{"leaf@leaf.src", "mid@mid.src", "root@root.src", "main@"}; !slices.Equal(chain, want) {
			t.Errorf("leaf's callers %v, want %v", chain, want)
		}
	}
}

// TestModelStacks: the model sees the samples' stacks through the frame of
// each location, not a copy of them, when every location is one frame and
// every sample has one; else it keeps its own, which its reports read
// alike (TestInlinedLines, and every golden output).
func TestModelStacks(t *testing.T) {
	withEmpty := processes()
	withEmpty.Sample = append(withEmpty.Sample, &profile.Sample{Value: []int64{1, 1}})
	for _, tc := range []struct {
		name   string
		p      *profile.Profile
		shared bool
	}{
		{"a frame a location", processes(), true},
		{"inlined functions", newProfBuilder().add("vm", 1, 3, 0, jit+":main", jit+":leaf|root").p, false},
		{"a sample without locations", withEmpty, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := contract.FromPProf(tc.p)
			m, err := newModel(p, 0)
			if err != nil {
				t.Fatal(err)
			}
			if shared := m.frameOf != nil; shared != tc.shared || shared == (m.stacks != nil) {
				t.Errorf("stacks seen through the locations: %v, want %v (own stacks: %d frames)", shared, tc.shared, len(m.stacks))
			}
			for i := range m.samples {
				s := &m.samples[i]
				if n := m.stack(s).len(); n != int(s.depth) || n == 0 {
					t.Errorf("sample %d: %d frames, depth %d", i, n, s.depth)
				}
			}
		})
	}
}

// processes is a profile of three processes, with unresolved frames in
// several modules, kernel frames and JIT code.
func processes() *profile.Profile {
	return newProfBuilder().
		add("sh", 100, 30, 30_000_000, dash+":main", dash+":evaltree", libc+":strlen").
		add("sh", 100, 12, 12_000_000, dash+":main", dash+":evaltree", dash+":?").
		add("sh", 100, 8, 8_000_000, dash+":main", dash+":?", dash+":?").
		add("sh", 100, 6, 6_000_000, dash+":main", libc+":?", kernel+":entry_SYSCALL_64", kernel+":do_syscall_64").
		add("sh", 100, 1, 1_000_000, dash+":main", dash+":evaltree", libc+":malloc").
		add("seq", 200, 20, 20_000_000, jit+":Interpreter::run@Main.java", jit+":Main.loop@Main.java", libc+":memcmp").
		add("seq", 200, 15, 30_000_000, jit+":Interpreter::run@Main.java", jit+":Main.loop@Main.java").
		add("seq", 200, 4, 4_000_000, jit+":Interpreter::run@Main.java", libc+":memcmp").
		add("node", 300, 4, 400_000, perfMap+":LazyCompile:*fib", perfMap+":?").
		p
}

// recursion is main calling a, which calls b, which calls a again.
func recursion() *profile.Profile {
	return newProfBuilder().
		add("prog", 1, 2, 2, dash+":main", dash+":a", dash+":b", dash+":a", dash+":b").
		add("prog", 1, 1, 1, dash+":main", dash+":a", dash+":b", dash+":a").
		add("prog", 1, 1, 1, dash+":main", dash+":a").
		p
}

func empty() *profile.Profile { return newProfBuilder().p }

var textTests = []struct {
	name string
	p    func() *profile.Profile
	o    Options
}{
	{"default", processes, Options{}},
	{"callgraph", processes, Options{CallGraph: true}},
	{"children", processes, Options{Children: true}},
	{"children_callgraph", processes, Options{Children: true, CallGraph: true}},
	{"sort_dso_sym", processes, Options{Sort: []string{"dso", "sym"}}},
	{"sort_pid", processes, Options{Sort: []string{"pid"}}},
	{"sort_comm_callgraph", processes, Options{Sort: []string{"comm"}, CallGraph: true}},
	{"percent_limit", processes, Options{MinPercent: 10, GraphMinPercent: 10, CallGraph: true}},
	{"period", processes, Options{Value: 1}},
	{"recursion", recursion, Options{Children: true, CallGraph: true}},
	{"recursion_callers", recursion, Options{CallGraph: true}},
	{"callgraph_caller", processes, Options{CallGraph: true, Order: OrderCaller}},
	{"children_callgraph_callee", processes, Options{Children: true, CallGraph: true, Order: OrderCallee}},
	{"recursion_caller", recursion, Options{CallGraph: true, Order: OrderCaller}},
	{"recursion_children_callee", recursion, Options{Children: true, CallGraph: true, Order: OrderCallee}},
	{"empty", empty, Options{}},
}

func TestText(t *testing.T) {
	for _, tt := range textTests {
		t.Run(tt.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := Text(&b, contract.FromPProf(tt.p()), tt.o); err != nil {
				t.Fatal(err)
			}
			golden(t, tt.name+".txt", b.Bytes())
		})
	}
}

var foldedTests = []struct {
	name string
	p    func() *profile.Profile
	o    Options
}{
	{"processes", processes, Options{CommRoot: true}},
	{"processes_nocomm", processes, Options{}},
	{"processes_period", processes, Options{CommRoot: true, Value: 1}},
	{"recursion", recursion, Options{CommRoot: true}},
	{"empty", empty, Options{CommRoot: true}},
}

func TestFolded(t *testing.T) {
	for _, tt := range foldedTests {
		t.Run(tt.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := Folded(&b, contract.FromPProf(tt.p()), tt.o); err != nil {
				t.Fatal(err)
			}
			golden(t, tt.name+".folded", b.Bytes())
		})
	}
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	file := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(file, got, 0o666); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("output differs from %s (go test -update rewrites it):\n--- got\n%s--- want\n%s", file, got, want)
	}
}

// decode runs JSON and decodes its output.
func decode(t *testing.T, p *profile.Profile, o Options) jsonReport {
	t.Helper()
	var b bytes.Buffer
	if err := JSON(&b, contract.FromPProf(p), o); err != nil {
		t.Fatal(err)
	}
	return decodeJSON(t, b.Bytes())
}

func decodeJSON(t *testing.T, b []byte) jsonReport {
	t.Helper()
	var r jsonReport
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(&r); err != nil {
		t.Fatalf("decoding %s: %v", b, err)
	}
	return r
}

// entryName names an entry by its keys, for comparisons.
func entryName(e jsonEntry) string {
	var s []string
	for _, f := range []string{e.Comm, e.Module, e.Symbol} {
		if f != "" {
			s = append(s, f)
		}
	}
	if e.PID != nil {
		s = append(s, strconv.FormatInt(*e.PID, 10))
	}
	return strings.Join(s, " ")
}

func TestAggregation(t *testing.T) {
	type want struct {
		name     string
		samples  int64
		self     int64
		children int64
	}
	tests := []struct {
		name  string
		p     func() *profile.Profile
		o     Options
		total int64
		want  []want // the listed entries, in order
	}{{
		name:  "recursion counted once",
		p:     recursion,
		o:     Options{Children: true, Sort: []string{"sym"}},
		total: 4,
		want:  []want{{"a", 2, 2, 4}, {"main", 0, 0, 4}, {"b", 2, 2, 3}},
	}, {
		name:  "unresolved grouped per module",
		p:     processes,
		o:     Options{Sort: []string{"module", "symbol"}, MinPercent: 5},
		total: 100,
		want: []want{
			{"libc.so.6 strlen", 30, 30, 0},
			{"libc.so.6 memcmp", 24, 24, 0},
			{"dash [unknown]", 20, 20, 0},
			{"jit-200.dump Main.loop", 15, 15, 0},
			{"[kernel.kallsyms] do_syscall_64", 6, 6, 0},
		},
	}, {
		name:  "processes",
		p:     processes,
		o:     Options{Sort: []string{"pid"}},
		total: 100,
		want:  []want{{"sh 100", 57, 57, 0}, {"seq 200", 39, 39, 0}, {"node 300", 4, 4, 0}},
	}, {
		name:  "comm only",
		p:     processes,
		o:     Options{Sort: []string{"comm"}, Children: true},
		total: 100,
		want:  []want{{"sh", 57, 57, 57}, {"seq", 39, 39, 39}, {"node", 4, 4, 4}},
	}, {
		name:  "value index",
		p:     processes,
		o:     Options{Value: 1, Sort: []string{"sym"}, MinPercent: 10},
		total: 111_400_000,
		want: []want{
			{"Main.loop", 15, 30_000_000, 0},
			{"strlen", 30, 30_000_000, 0},
			{"memcmp", 24, 24_000_000, 0},
			{"[unknown]", 24, 20_400_000, 0},
		},
	}, {
		name:  "percent limit hides children below it",
		p:     processes,
		o:     Options{Children: true, Sort: []string{"comm", "sym"}, MinPercent: 39},
		total: 100,
		want:  []want{{"sh main", 0, 0, 57}, {"sh evaltree", 0, 0, 43}, {"seq Interpreter::run", 0, 0, 39}},
	}, {
		name:  "empty",
		p:     empty,
		o:     Options{},
		total: 0,
		want:  nil,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := decode(t, tt.p(), tt.o)
			if r.Total != tt.total {
				t.Errorf("total = %d, want %d", r.Total, tt.total)
			}
			var got []want
			for _, e := range r.Entries {
				var children int64
				if e.Children != nil {
					children = *e.Children
				}
				got = append(got, want{entryName(e), e.Samples, e.Self, children})
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("entries:\n got %v\nwant %v", got, tt.want)
			}
		})
	}
}

func TestJSONSchema(t *testing.T) {
	var b bytes.Buffer
	o := Options{Sort: []string{"comm", "pid", "dso", "sym"}, Children: true, CallGraph: true}
	if err := JSON(&b, contract.FromPProf(processes()), o); err != nil {
		t.Fatal(err)
	}
	var r map[string]any
	if err := json.Unmarshal(b.Bytes(), &r); err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]any{
		"event":   "cpu-clock",
		"type":    "samples",
		"unit":    "count",
		"samples": 100.0,
		"total":   100.0,
		"mode":    "children",
		"sort":    []any{"comm", "pid", "module", "symbol"},
	} {
		if got := fmt.Sprint(r[k]); got != fmt.Sprint(want) {
			t.Errorf("%s = %s, want %v", k, got, want)
		}
	}
	entries := r["entries"].([]any)
	first := entries[0].(map[string]any)
	for _, k := range []string{"comm", "pid", "module", "symbol", "samples", "self", "children", "callees"} {
		if _, ok := first[k]; !ok {
			t.Errorf("first entry lacks %q: %v", k, first)
		}
	}
	node := first["callees"].([]any)[0].(map[string]any)
	for _, k := range []string{"symbol", "module", "value"} {
		if _, ok := node[k]; !ok {
			t.Errorf("call graph node lacks %q: %v", k, node)
		}
	}

	// The Interpreter::run entry's tree sums to its children value and
	// goes down to the callees.
	full := decode(t, processes(), o)
	i := slices.IndexFunc(full.Entries, func(e jsonEntry) bool { return e.Symbol == "Interpreter::run" })
	if i < 0 {
		t.Fatalf("no Interpreter::run entry: %+v", full.Entries)
	}
	e := full.Entries[i]
	if e.File != "Main.java" {
		t.Errorf("file = %q, want Main.java", e.File)
	}
	root := e.Callees[0]
	if root.Symbol != "Interpreter::run" || root.Value != *e.Children || len(root.Callees) != 2 {
		t.Errorf("callee tree of %s: %+v", e.Symbol, root)
	}

	r2 := decode(t, empty(), Options{})
	if r2.Entries == nil {
		t.Error("entries of an empty profile decode as null")
	}
}

func TestFoldedNames(t *testing.T) {
	p := newProfBuilder().
		add("my prog", 1, 2, 0, dash+":main", dash+":operator;(int)", libc+":?").
		add("my prog", 1, 3, 0, dash+":main", dash+":operator:(int)", libc+":?").
		add("my prog", 1, 1, 0, dash+":main", dash+":two\nlines", "[vdso]:?").
		add("other", 2, 1, 0).
		p
	var b bytes.Buffer
	if err := Folded(&b, contract.FromPProf(p), Options{CommRoot: true}); err != nil {
		t.Fatal(err)
	}
	want := "my_prog;main;operator:(int);[libc.so.6] 5\n" +
		"my_prog;main;two lines;[vdso] 1\n" +
		"other;[unknown] 1\n"
	if got := b.String(); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

type renderer func(io.Writer, *contract.Profile, Options) error

func TestErrors(t *testing.T) {
	tests := []struct {
		o      Options
		want   string
		static bool // whether CheckOptions reports it
	}{
		{Options{Sort: []string{"comm", "srcline"}}, `"srcline"`, true},
		{Options{MinPercent: -1}, "negative percent limit", true},
		{Options{Value: -1}, "negative value index", true},
		{Options{Value: 2}, "value index 2 out of range", false},
	}
	for _, tt := range tests {
		for name, f := range map[string]renderer{
			"Text": Text, "JSON": JSON, "Folded": Folded,
		} {
			err := f(io.Discard, contract.FromPProf(processes()), tt.o)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("%s(%+v) = %v, want error containing %s", name, tt.o, err, tt.want)
			}
		}
		if err := CheckOptions(tt.o); (err != nil) != tt.static {
			t.Errorf("CheckOptions(%+v) = %v", tt.o, err)
		}
	}
}

type failWriter struct{}

var errWrite = errors.New("write failed")

func (failWriter) Write([]byte) (int, error) { return 0, errWrite }

func TestWriteError(t *testing.T) {
	o := Options{CallGraph: true, CommRoot: true}
	for name, err := range map[string]error{
		"Text":   Text(failWriter{}, contract.FromPProf(processes()), o),
		"JSON":   JSON(failWriter{}, contract.FromPProf(processes()), o),
		"Folded": Folded(failWriter{}, contract.FromPProf(processes()), o),
	} {
		if !errors.Is(err, errWrite) {
			t.Errorf("%s = %v, want %v", name, err, errWrite)
		}
	}
}

// benchProfile has stacks distinct stacks of the given depth over a few
// thousand functions in a few modules, some unresolved, for two processes.
func benchProfile(stacks, depth int) *profile.Profile {
	r := rand.New(rand.NewPCG(1, 2))
	modules := []string{dash, libc, kernel, jit, perfMap}
	b := newProfBuilder()
	frames := make([]string, depth)
	for i := range stacks {
		for d := range frames {
			// Stacks share their roots, as real ones do, and fan out
			// toward the leaves.
			n := min(4+d*d*4, 2000)
			fn := r.IntN(n)
			frames[d] = fmt.Sprintf("%s:fn%d", modules[fn%len(modules)], fn)
			if fn%97 == 0 {
				frames[d] = modules[fn%len(modules)] + ":?"
			}
		}
		frames[depth-1] = fmt.Sprintf("%s:leaf%d", modules[i%len(modules)], i%5000)
		comm, pid := "java", int64(1000)
		if i%3 == 0 {
			comm, pid = "node", 2000
		}
		n := int64(1 + r.IntN(10))
		b.add(comm, pid, n, n*1_000_000, frames...)
	}
	return b.p
}

func benchmark(b *testing.B, f func(*contract.Profile) error) {
	p := contract.FromPProf(benchProfile(50_000, 30))
	b.ReportAllocs()
	for b.Loop() {
		if err := f(p); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkText(b *testing.B) {
	benchmark(b, func(p *contract.Profile) error { return Text(io.Discard, p, Options{}) })
}

func BenchmarkTextChildren(b *testing.B) {
	benchmark(b, func(p *contract.Profile) error { return Text(io.Discard, p, Options{Children: true}) })
}

func BenchmarkTextCallGraph(b *testing.B) {
	benchmark(b, func(p *contract.Profile) error {
		return Text(io.Discard, p, Options{Children: true, CallGraph: true, GraphMinPercent: DefaultMinPercent})
	})
}

func BenchmarkJSON(b *testing.B) {
	benchmark(b, func(p *contract.Profile) error {
		return JSON(io.Discard, p, Options{CallGraph: true, GraphMinPercent: DefaultMinPercent})
	})
}

func BenchmarkFolded(b *testing.B) {
	benchmark(b, func(p *contract.Profile) error { return Folded(io.Discard, p, Options{CommRoot: true}) })
}

// TestUnknownNames: a function without a name, or named as unresolved
// addresses are, is one frame with the module's unresolved addresses.
func TestUnknownNames(t *testing.T) {
	p := newProfBuilder().
		add("sh", 1, 1, 0, dash+":main", dash+":?").
		add("sh", 1, 2, 0, dash+":main", dash+":").
		add("sh", 1, 4, 0, dash+":main", dash+":"+unknown).
		p
	var b bytes.Buffer
	if err := Folded(&b, contract.FromPProf(p), Options{CommRoot: true}); err != nil {
		t.Fatal(err)
	}
	if got, want := b.String(), "sh;main;[dash] 7\n"; got != want {
		t.Errorf("folded:\n%s\nwant\n%s", got, want)
	}
	var entries []string
	for _, e := range decode(t, p, Options{Sort: []string{"dso", "sym"}, Children: true}).Entries {
		entries = append(entries, fmt.Sprintf("%s %s %d %d", e.Module, e.Symbol, e.Self, *e.Children))
	}
	if want := []string{"dash [unknown] 7 7", "dash main 0 7"}; !slices.Equal(entries, want) {
		t.Errorf("entries %q, want %q", entries, want)
	}
}
