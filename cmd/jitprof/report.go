package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/signal"
	"regexp"
	"runtime/debug"
	"strings"
	"sync"
	"syscall"

	"github.com/jitprof/jitprof/internal/archive"
	"github.com/jitprof/jitprof/internal/contract"
	"github.com/jitprof/jitprof/internal/jitsources"
	"github.com/jitprof/jitprof/internal/perfprof"
	"github.com/jitprof/jitprof/internal/procfs"
	"github.com/jitprof/jitprof/internal/report"
	"github.com/jitprof/jitprof/internal/runtimes"
	"github.com/jitprof/jitprof/internal/stages"
	"github.com/jitprof/jitprof/internal/webui"
	"github.com/spf13/cobra"
)

// sampleFlags are the flags of every command that reads samples: where the
// recording and its dumps are, and which samples to keep.
type sampleFlags struct {
	opts       perfprof.Options
	pids, tids []uint
	comms      []string
	timeRange  string
	symbol     string
	quiet      bool
	// unpacked is the archive the input named, unpacked until close;
	// closing and watched stop and wait for the watch on it (see unpack).
	unpacked         *archive.Extracted
	closing, watched chan struct{}
	// described are the processes whose runtime described its code in a
	// file the analysis warned about (jitsources.DescribedError): their
	// code unnamed is that file's doing, not a runtime flag missing.
	described   map[uint32]bool
	describedMu sync.Mutex
}

// close removes what reading the input left behind.
func (s *sampleFlags) close() {
	if s.closing != nil {
		close(s.closing)
		<-s.watched
	}
	s.unpacked.Close()
}

// unpack unpacks the archive the input names for the command's life. Until
// close, Ctrl-C or SIGTERM removes it and then ends jitprof as the signal
// would have: the analysis cannot be interrupted, and what is unpacked (a
// recording's whole size and more) must not outlive it.
func (s *sampleFlags) unpack() error {
	signals := make(chan os.Signal, 1)
	for _, sig := range []os.Signal{os.Interrupt, syscall.SIGTERM} {
		// One ignored (nohup, a background job) stays so: the signal
		// raised again would not end jitprof, which would go on without
		// what it unpacked.
		if !signal.Ignored(sig) {
			signal.Notify(signals, sig)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	extracted := make(chan *archive.Extracted, 1)
	s.closing, s.watched = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(s.watched)
		defer cancel()
		select {
		case sig := <-signals:
			cancel()
			// Extract removes its directory itself when it stops short.
			(<-extracted).Close()
			signal.Stop(signals)
			syscall.Kill(os.Getpid(), sig.(syscall.Signal))
		case <-s.closing:
			signal.Stop(signals)
		}
	}()
	x, err := archive.Extract(ctx, s.opts.Input, "")
	extracted <- x
	if err != nil {
		if ctx.Err() != nil {
			// A signal stopped the unpacking: the watcher raises it
			// again once the directory is gone, which ends jitprof as
			// the signal would have. Returning now raced it, and
			// jitprof ended with status 1 instead.
			<-s.watched
		}
		return &exitError{code: 1, err: err}
	}
	s.unpacked = x
	s.opts.Input, s.opts.Files = x.Input, x.Files
	return nil
}

// setWarn sends the analysis's warnings to the command's error stream.
func (s *sampleFlags) setWarn(cmd *cobra.Command) {
	stderr := cmd.ErrOrStderr()
	s.opts.Warn = func(err error) {
		if de := (*jitsources.DescribedError)(nil); errors.As(err, &de) {
			s.describedMu.Lock()
			if s.described == nil {
				s.described = make(map[uint32]bool)
			}
			for _, pid := range de.Pids {
				s.described[pid] = true
			}
			s.describedMu.Unlock()
		}
		if !s.quiet {
			fmt.Fprintln(stderr, "jitprof: warning:", err)
		}
	}
}

func (s *sampleFlags) register(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVarP(&s.opts.Input, "input", "i", "perf.data", "the recording, or an archive jitprof archive wrote")
	f.StringArrayVar(&s.opts.DumpDirs, "jitdump-dir", nil, "search `DIR` for dumps not at their recorded path (repeatable)")
	f.StringArrayVar(&s.opts.PerfMapDirs, "perfmap-dir", nil, "search `DIR` for perf-<pid>.map files, before /tmp (repeatable)")
	f.BoolVarP(&s.opts.Host.Force, "force", "f", false, "read dumps and perf maps whoever owns them, as perf's -f (by default one owned by neither its process's owner nor root, nor by you once the process is gone, is skipped)")
	f.StringVar(&s.opts.Event, "event", "", "the event to report, as perf evlist names it (default the first)")
	f.UintSliceVar(&s.pids, "pid", nil, "only samples of these process ids")
	f.UintSliceVar(&s.tids, "tid", nil, "only samples of these thread ids")
	f.StringSliceVar(&s.comms, "comm", nil, "only samples of threads with these names")
	f.StringVar(&s.timeRange, "time", "", "only samples in `START,END`, seconds of perf's clock as perf script shows them (either may be empty)")
	f.StringVar(&s.symbol, "symbol", "", "only samples with a frame whose name matches this `REGEXP`")
	f.BoolVarP(&s.quiet, "quiet", "q", false, "no warnings and no summary")
}

// analyze reads the recording with the flags' filter: a profile per stage
// (one without stages).
func (s *sampleFlags) analyze(cmd *cobra.Command, specs []stages.Spec) ([]*perfprof.Result, error) {
	if err := s.setFilter(); err != nil {
		return nil, err
	}
	// The analysis's heap is mostly long-lived tables (symbols, dumps,
	// the distinct stacks): collecting when it has grown by a quarter
	// rather than doubled costs about 5% of the time and keeps the peak
	// near the live heap (docs/performance.md); at a tenth, 7 to 21% more
	// CPU time for 2% less memory on deep stacks.
	debug.SetGCPercent(25)
	stderr := cmd.ErrOrStderr()
	s.setWarn(cmd)
	if archive.Is(s.opts.Input) {
		if err := s.unpack(); err != nil {
			return nil, err
		}
	}
	if s.opts.Files == nil {
		// The files the analysis finds in a container's root, which
		// annotate and the web UI read the code of after it.
		s.opts.Files = &contract.Files{}
	}
	results, err := perfprof.RunStages(s.opts, specs)
	if err != nil {
		return nil, readFailed(cmd, s.opts.Input, err)
	}
	if !s.quiet {
		for _, res := range results {
			fmt.Fprintf(stderr, "jitprof: %d of %d %s samples kept, %d in jitted code of %s", res.Kept, res.Samples, res.Event, res.Jitted, count(len(res.Dumps), "dump"))
			if res.PerfMapped > 0 {
				fmt.Fprintf(stderr, ", %d named from perf maps", res.PerfMapped)
			}
			if res.Lost > 0 {
				fmt.Fprintf(stderr, "; the kernel lost %d samples", res.Lost)
			}
			if res.Unwound > 0 {
				fmt.Fprintf(stderr, "; %d user stacks unwound", res.Unwound)
			}
			fmt.Fprintln(stderr)
			if res.CutShort*100 >= res.Unwound && res.CutShort > 0 { // 1%
				fmt.Fprintf(stderr, "jitprof: %d of the unwound stacks ran past the stack copy their sample holds: their outermost callers are missing "+
					"(record with a larger copy: --call-graph dwarf,16384)\n", res.CutShort)
			}
			for _, u := range res.Waiting {
				// Only a process that still runs has more of its dump to
				// write; a gone one's dump is as whole as it will be.
				if _, err := procfs.Host.Process(u.Pid, res.Last); err != nil {
					continue
				}
				fmt.Fprintf(stderr, "jitprof: %d of the %d samples of process %d (%s) are in code its jitdump does not describe yet: it still runs, and its runtime writes its dump through a buffer (V8: up to 2 MB); report again once it has exited, and they will be named\n",
					u.Samples, u.Kept, u.Pid, u.Comm)
			}
			for _, u := range res.Unnamed {
				// A runtime that wrote a dump or perf map was started
				// right: its flag is no help, the file's warning is.
				hint := " " + describeHint(u.Comm)
				switch {
				case s.described[u.Pid]:
					hint = " Its runtime described it in a file not read: see the warning above."
				case u.PerfMapped:
					hint = " Its perf map names only part of it."
				}
				fmt.Fprintf(stderr, "jitprof: %d of the %d samples of process %d (%s) are in anonymous memory that no jitdump or perf map describes: its JIT's code is unnamed.%s\n",
					u.Samples, u.Kept, u.Pid, u.Comm, hint)
			}
			for _, st := range res.Stripped {
				if st.Samples*20 >= res.Kept { // 5%: worth a package install
					fmt.Fprintf(stderr, "jitprof: %.1f%% of the samples are in %s, a stripped file, so its functions show as [unknown]; "+
						"its debug symbols would name them (Debian: the -dbgsym package of the package `dpkg -S FILE` names, from the debian-debug archive)\n",
						100*float64(st.Samples)/float64(res.Kept), st.Path)
				}
			}
		}
	}
	return results, nil
}

// readFailed is the exit of a command whose reading of the recording
// failed with err. A recording at -i's default that is not there is said
// with how to get one: whoever runs a command bare in a directory with no
// perf.data has not recorded yet, or recorded under another name.
func readFailed(cmd *cobra.Command, input string, err error) error {
	var pe *fs.PathError
	if !cmd.Flags().Changed("input") && errors.As(err, &pe) && pe.Path == input && errors.Is(err, fs.ErrNotExist) {
		err = fmt.Errorf("%s: no such file (record one with jitprof record -- CMD, or name one with -i FILE)", input)
	}
	return &exitError{code: 1, err: err}
}

// describeHint says how the runtime a process's name suggests is made to
// describe its code.
func describeHint(comm string) string {
	const any = "A JIT runtime describes its code in a jitdump or in /tmp/perf-PID.map when asked (README: Runtimes); jitprof record -- CMD asks those it knows."
	r := runtimes.Of("", comm)
	if r == nil {
		return any
	}
	return fmt.Sprintf("%s describes it when started with %s; jitprof record -- CMD sets that for you.", r.Name, r.Flag)
}

// setFilter sets the analysis's filter from the flags.
func (s *sampleFlags) setFilter() error {
	flt := &s.opts.Filter
	flt.Pids, flt.Tids = nil, nil
	for _, p := range s.pids {
		flt.Pids = append(flt.Pids, uint32(p))
	}
	for _, t := range s.tids {
		flt.Tids = append(flt.Tids, uint32(t))
	}
	flt.Comms = s.comms
	var err error
	if flt.Start, flt.End, err = stages.ParseRange(s.timeRange); err != nil {
		return &exitError{code: 2, err: err}
	}
	if s.symbol != "" {
		if flt.Symbol, err = regexp.Compile(s.symbol); err != nil {
			return &exitError{code: 2, err: fmt.Errorf("--symbol: %w", err)}
		}
	}
	return nil
}

func newReportCmd() *cobra.Command {
	var (
		samples    sampleFlags
		format     string
		output     string
		httpAddr   string
		sourceDir  string
		sortKeys   []string
		children   bool
		callGraph  string
		limit      float64
		graph      float64
		byPeriod   bool
		offCPU     bool
		wall       bool
		noBrowser  bool
		stageSpecs []string
		noChildren bool
		stdio      bool
	)
	cmd := &cobra.Command{
		Use:   "report [-i perf.data]",
		Short: "Profile straight from perf.data, jitted code named from its dumps (no inject step)",
		Long: `Reads a recording made with perf record -k mono (or jitprof record), finds
the jitdump files and perf maps of its processes and names every sample and
call chain frame as it was when the sample was taken: a function that moved,
or an address the JIT gave to another function later, is attributed to
whoever held it then. Native code is named from the ELF files' symbols
(build-ids checked, debug files found as perf finds them), the kernel from
/proc/kallsyms when the recording was made on the running kernel.

Formats: text (perf report's top table; --children, -g call graphs, -g caller
or callee for their order), json
(the same, for scripts), pprof (profile.proto for go tool pprof), folded
(one line per stack, for flamegraph.pl and speedscope), html (one
self-contained page with an interactive flame graph; with --off-cpu or
--wall, a timeline of each thread's time on and off its CPU above it), gmon (gmon.out and a
symbol file for GNU gprof, in the directory -o names), kaffe-as (the same with
Kaffe's assembler symbol file). --http serves pprof's web UI (flame graph,
top, source, disassembly of jitted code) on the profile, to whoever has the
token of the URL it prints; its source views show files under --source-dir
only. --stage reports
parts of the run on their own: by time, or as the program marked them.`,
		Example: `  perf record -k mono -g -- node --perf-prof app.js
  jitprof report
  jitprof report --children -g --comm node
  jitprof report -g caller
  jitprof report --format pprof -o app.pb.gz && go tool pprof -top app.pb.gz
  jitprof report --format folded -o app.folded && flamegraph.pl app.folded > app.svg
  jitprof report --http localhost:8080 --source-dir ~/app
  jitprof report -g --format gmon -o prof && gprof -b prof/jitprof-symbols prof/gmon.out
  jitprof report --stage startup=,2 --stage steady=2,`,
		Args: func(cmd *cobra.Command, args []string) error {
			// perf report -g caller: the order after a space, which pflag
			// leaves as an argument of a flag whose value is optional.
			if len(args) == 1 && callGraph == graphOnly {
				callGraph = args[0]
				return nil
			}
			return cobra.NoArgs(cmd, args)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			opts := report.Options{Sort: sortKeys, Children: children, CallGraph: callGraph != "", MinPercent: limit, GraphMinPercent: graph, CommRoot: true}
			if byPeriod || offCPU || wall {
				opts.Value = 1 // the time, off the CPU or in all
			}
			f, err := report.ParseFormat(format)
			if err == nil && callGraph != "" && callGraph != graphOnly {
				opts.Order, err = report.ParseCallOrder(callGraph)
			}
			switch {
			case err != nil:
			case children && noChildren:
				err = fmt.Errorf("--children and --no-children: give one")
			case stdio && (f != report.FormatText || httpAddr != ""):
				err = fmt.Errorf("--stdio is the text report: not with --format %s or --http", format)
			case offCPU && wall:
				err = fmt.Errorf("--off-cpu and --wall: give one (--wall holds the off-CPU time too)")
			default:
				err = report.CheckOptions(opts)
			}
			specs, err2 := stages.Parse(stageSpecs)
			switch {
			case err != nil:
			case err2 != nil:
				err = err2
			case httpAddr != "" && len(specs) > 0:
				err = fmt.Errorf("--http serves one profile: use --time or --symbol rather than --stage")
			case httpAddr == "" && sourceDir != "":
				err = fmt.Errorf("--source-dir is for --http's source views")
			case sourceDir != "":
				err = webui.CheckSourceDir(sourceDir)
			case httpAddr == "":
				err = f.CheckOutput(output)
			}
			if err != nil {
				return &exitError{code: 2, err: err}
			}
			samples.opts.PerFunction = !f.ByAddress() && httpAddr == ""
			switch {
			case offCPU:
				samples.opts.View = perfprof.OffCPUView
			case wall:
				samples.opts.View = perfprof.WallView
			}
			// The page draws each thread's time on and off the CPU;
			// other formats have no use for it.
			samples.opts.Timeline = f == report.FormatHTML && (offCPU || wall)
			results, err := samples.analyze(cmd, specs)
			defer samples.close()
			if err != nil {
				return err
			}
			opts.Files = samples.opts.Files
			names := make([]string, len(results))
			profiles := make([]*contract.Profile, len(results))
			for i, res := range results {
				profiles[i] = res.Profile
				if len(specs) > 0 {
					names[i] = specs[i].Name
				}
			}
			if httpAddr != "" {
				ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
				defer stop()
				return webui.Serve(ctx, profiles[0].PProf(), webui.Options{
					HostPort: httpAddr, OpenBrowser: !noBrowser && browserCanStart(), Files: samples.opts.Files,
					SourceDir: sourceDir, Warn: samples.opts.Warn,
					Ready: func(url string) {
						fmt.Fprintf(cmd.ErrOrStderr(), "jitprof: serving the profile on %s (Ctrl-C ends; the URL's token is the key: share it with no one)\n", url)
					},
				})
			}
			written, err := report.Write(f, output, cmd.OutOrStdout(), names, profiles, opts)
			if err != nil {
				return &exitError{code: 1, err: err}
			}
			if f.Directory() && !samples.quiet {
				fmt.Fprintf(cmd.ErrOrStderr(), "jitprof: wrote %s\n", strings.Join(written, ", "))
			}
			return nil
		},
	}
	samples.register(cmd)
	cmd.Flags().StringArrayVar(&stageSpecs, "stage", nil, "report the stage `NAME=START,END` (seconds from the first sample; either may be empty), or the stage NAME the program marked in its dump; repeatable: one report, or one gmon file, per stage")
	f := cmd.Flags()
	f.StringVar(&format, "format", "text", "text, json, pprof, folded, html (a flame graph page), gmon or kaffe-as (gprof's files, into the directory -o names)")
	f.StringVarP(&output, "output", "o", "", "write to `FILE` (whole or not at all) instead of standard output")
	f.StringVar(&httpAddr, "http", "", "serve pprof's web UI on `HOST:PORT` instead of writing a report: localhost when HOST is empty; only to the URL printed, which holds a token")
	f.StringVar(&sourceDir, "source-dir", "", "with --http, show source files from `DIR` (no others): a profile's file name is looked up under DIR, as a path under it or from it")
	f.BoolVar(&noBrowser, "no-browser", false, "with --http, do not open a browser")
	f.StringSliceVarP(&sortKeys, "sort", "s", nil, "group by these keys: symbol, module, comm, pid (default comm,module,symbol)")
	f.BoolVar(&children, "children", false, "also count the samples below each entry (perf report --children)")
	f.BoolVar(&noChildren, "no-children", false, "count each entry's own samples only: the default (perf report's flag)")
	f.BoolVar(&stdio, "stdio", false, "the text report: the default (perf report's flag)")
	f.StringVarP(&callGraph, "call-graph", "g", "", "show each entry's call graph, its frames in `ORDER`, as perf report -g names it: callee (from the entry out to its callers) or caller (from the outermost callers in); -g alone (or -g graph): perf report's order without -g, callee, or caller with --children")
	f.Lookup("call-graph").NoOptDefVal = graphOnly
	f.Float64Var(&limit, "percent-limit", 0, "hide entries below this percentage of the samples")
	f.Float64Var(&graph, "graph-limit", report.DefaultMinPercent, "hide call graph branches below this percentage of the samples")
	f.BoolVar(&offCPU, "off-cpu", false, "the time threads spent off their CPU (blocked, or waiting to run), by the stack they left it in, from a recording made with record --off-cpu")
	f.BoolVar(&wall, "wall", false, "wall-clock time: each thread's CPU samples, in time, and its time off the CPU, which add up to its elapsed time (a recording made with record --off-cpu); pprof's sample types wall, cpu and off-cpu")
	f.BoolVar(&byPeriod, "period", false, "weigh samples by their period (time, for cpu-clock) instead of counting them")
	f.BoolVar(&samples.opts.NoInline, "no-inline", false, "count the methods a JIT inlined (JITPROF_INLINE records) to the function that holds their code, as perf report --no-inline does")
	return cmd
}

// graphOnly is --call-graph's value when given no order: perf report's -g
// print type, which it also accepts.
const graphOnly = "graph"

// browserCanStart tells whether a browser started for --http could show
// anything: not as root (Chromium refuses to run as root without
// --no-sandbox), not without a display; the URL is printed either way.
func browserCanStart() bool {
	if os.Getenv("BROWSER") != "" {
		return true // the user chose one
	}
	return os.Geteuid() != 0 && (os.Getenv("DISPLAY") != "" || os.Getenv("WAYLAND_DISPLAY") != "")
}
