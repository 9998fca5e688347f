package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"regexp"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/google/pprof/profile"
	"github.com/jitprof/jitprof/internal/perfprof"
	"github.com/jitprof/jitprof/internal/atomicfile"
	"github.com/jitprof/jitprof/internal/dumpindex"
	"github.com/jitprof/jitprof/internal/report"
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
}

func (s *sampleFlags) register(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVarP(&s.opts.Input, "input", "i", "perf.data", "the recording")
	f.StringArrayVar(&s.opts.DumpDirs, "jitdump-dir", nil, "search `DIR` for dumps not at their recorded path (repeatable)")
	f.StringArrayVar(&s.opts.PerfMapDirs, "perfmap-dir", nil, "search `DIR` for perf-<pid>.map files not in /tmp (repeatable)")
	f.StringVar(&s.opts.Event, "event", "", "the event to report, as perf evlist names it (default the first)")
	f.UintSliceVar(&s.pids, "pid", nil, "only samples of these process ids")
	f.UintSliceVar(&s.tids, "tid", nil, "only samples of these thread ids")
	f.StringSliceVar(&s.comms, "comm", nil, "only samples of threads with these names")
	f.StringVar(&s.timeRange, "time", "", "only samples in `START,END`, seconds of perf's clock as perf script shows them (either may be empty)")
	f.StringVar(&s.symbol, "symbol", "", "only samples with a frame whose name matches this `REGEXP`")
	f.BoolVarP(&s.quiet, "quiet", "q", false, "no warnings and no summary")
}

// analyze reads the recording with the flags' filter.
func (s *sampleFlags) analyze(cmd *cobra.Command) (*perfprof.Result, error) {
	if err := s.setFilter(); err != nil {
		return nil, err
	}
	return s.run(cmd)
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
	if flt.Start, flt.End, err = parseTimeRange(s.timeRange); err != nil {
		return &exitError{code: 2, err: err}
	}
	if s.symbol != "" {
		if flt.Symbol, err = regexp.Compile(s.symbol); err != nil {
			return &exitError{code: 2, err: fmt.Errorf("--symbol: %w", err)}
		}
	}
	return nil
}

// run reads the recording with the filter as set.
func (s *sampleFlags) run(cmd *cobra.Command) (*perfprof.Result, error) {
	// The analysis's heap is mostly long-lived tables (symbols, dumps,
	// the calling context tree): collecting when it has grown by a
	// quarter rather than doubled costs about 5% of the time and keeps the
	// peak well under twice the input (README, Performance).
	debug.SetGCPercent(25)
	stderr := cmd.ErrOrStderr()
	s.opts.Warn = func(err error) {
		if !s.quiet {
			fmt.Fprintln(stderr, "jitprof: warning:", err)
		}
	}
	res, err := perfprof.Run(s.opts)
	if err != nil {
		return nil, &exitError{code: 1, err: err}
	}
	if !s.quiet {
		fmt.Fprintf(stderr, "jitprof: %d of %d %s samples kept, %d in jitted code of %d dumps", res.Kept, res.Samples, res.Event, res.Jitted, res.Dumps)
		if res.Lost > 0 {
			fmt.Fprintf(stderr, "; the kernel lost %d samples", res.Lost)
		}
		fmt.Fprintln(stderr)
	}
	return res, nil
}

// parseTimeRange reads perf's --time START,END, in seconds.
func parseTimeRange(s string) (start, end uint64, err error) {
	if s == "" {
		return 0, 0, nil
	}
	a, b, ok := strings.Cut(s, ",")
	if !ok {
		return 0, 0, fmt.Errorf("--time %q: want START,END", s)
	}
	parse := func(v string) (uint64, error) {
		if v == "" {
			return 0, nil
		}
		sec, err := strconv.ParseFloat(v, 64)
		if err != nil || sec < 0 || sec > math.MaxUint64/1e9 {
			return 0, fmt.Errorf("--time %q: %q is not a time in seconds", s, v)
		}
		return uint64(math.Round(sec * 1e9)), nil
	}
	if start, err = parse(a); err != nil {
		return 0, 0, err
	}
	if end, err = parse(b); err != nil {
		return 0, 0, err
	}
	if end != 0 && end <= start {
		return 0, 0, fmt.Errorf("--time %q: the end is not after the start", s)
	}
	return start, end, nil
}

func newReportCmd() *cobra.Command {
	var (
		samples   sampleFlags
		format    string
		output    string
		httpAddr  string
		sortKeys  []string
		children  bool
		callGraph bool
		limit     float64
		graph     float64
		byPeriod  bool
		noBrowser bool
		stages    stageFlags
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

Formats: text (perf report's top table; --children, -g call graphs), json
(the same, for scripts), pprof (profile.proto for go tool pprof), folded
(one line per stack, for flamegraph.pl and speedscope), gmon (gmon.out and a
symbol file for GNU gprof, in the directory -o names), kaffe-as (the same with
Kaffe's assembler symbol file). --http serves pprof's web UI (flame graph,
top, source, disassembly of jitted code) on the profile. --stage reports
parts of the run on their own: by time, or as the program marked them.`,
		Example: `  perf record -k mono -g -- node --perf-prof app.js
  jitprof report
  jitprof report --children -g --comm node
  jitprof report --format pprof -o app.pb.gz && go tool pprof -top app.pb.gz
  jitprof report --format folded -o app.folded && flamegraph.pl app.folded > app.svg
  jitprof report --http localhost:8080
  jitprof report -g --format gmon -o prof && gprof -b prof/jitprof-symbols prof/gmon.out
  jitprof report --stage startup=,2 --stage steady=2,`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			opts := report.Options{Sort: sortKeys, Children: children, CallGraph: callGraph, MinPercent: limit, GraphMinPercent: graph, CommRoot: true}
			if byPeriod {
				opts.Value = 1
			}
			var write func(io.Writer, *profile.Profile) error
			switch format {
			case "text":
				write = func(w io.Writer, p *profile.Profile) error { return report.Text(w, p, opts) }
			case "json":
				write = func(w io.Writer, p *profile.Profile) error { return report.JSON(w, p, opts) }
			case "folded":
				write = func(w io.Writer, p *profile.Profile) error { return report.Folded(w, p, opts) }
			case "pprof":
				if output == "" && httpAddr == "" {
					return &exitError{code: 2, err: fmt.Errorf("--format pprof writes a binary file: give -o FILE")}
				}
				write = func(w io.Writer, p *profile.Profile) error { return p.Write(w) }
			case "gmon", "kaffe-as": // files for gprof, written by stages.report
			default:
				return &exitError{code: 2, err: fmt.Errorf("--format %q: want text, json, pprof, folded, gmon or kaffe-as", format)}
			}
			if err := report.CheckOptions(opts); err != nil {
				return &exitError{code: 2, err: err}
			}
			// Only the web UI reads the dumps again (to disassemble).
			samples.opts.ProfileOnly = httpAddr == ""
			// Text, JSON and folded stacks name functions, never addresses.
			samples.opts.PerFunction = (format == "text" || format == "json" || format == "folded") && httpAddr == ""
			if write == nil || len(stages.specs) > 0 {
				return stages.report(cmd, &samples, format, output, httpAddr != "", write)
			}
			res, err := samples.analyze(cmd)
			if err != nil {
				return err
			}
			defer res.Close()
			if httpAddr != "" {
				ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt)
				defer stop()
				return serve(ctx, cmd, res, httpAddr, !noBrowser)
			}
			// The renderers build their own model of the profile, which
			// can then go: nothing else holds it.
			p := res.Profile
			res.Profile = nil
			if output == "" {
				return write(cmd.OutOrStdout(), p)
			}
			return atomicfile.Write(output, func(w io.Writer) error { return write(w, p) })
		},
	}
	samples.register(cmd)
	stages.register(cmd)
	f := cmd.Flags()
	f.StringVar(&format, "format", "text", "text, json, pprof, folded, gmon or kaffe-as (gprof's files, into the directory -o names)")
	f.StringVarP(&output, "output", "o", "", "write to `FILE` (whole or not at all) instead of standard output")
	f.StringVar(&httpAddr, "http", "", "serve pprof's web UI on `HOST:PORT` instead of writing a report")
	f.BoolVar(&noBrowser, "no-browser", false, "with --http, do not open a browser")
	f.StringSliceVarP(&sortKeys, "sort", "s", nil, "group by these keys: symbol, module, comm, pid (default comm,module,symbol)")
	f.BoolVar(&children, "children", false, "also count the samples below each entry (perf report --children)")
	f.BoolVarP(&callGraph, "call-graph", "g", false, "show each entry's call graph")
	f.Float64Var(&limit, "percent-limit", 0, "hide entries below this percentage of the samples")
	f.Float64Var(&graph, "graph-limit", report.DefaultMinPercent, "hide call graph branches below this percentage of the samples")
	f.BoolVar(&byPeriod, "period", false, "weigh samples by their period (time, for cpu-clock) instead of counting them")
	return cmd
}

// serve runs pprof's web UI on the profile until ctx ends.
func serve(ctx context.Context, cmd *cobra.Command, res *perfprof.Result, addr string, browser bool) error {
	dumps := make(map[string]*dumpindex.Dump)
	for _, m := range res.Space.Dumps() {
		dumps[m.Name] = m.Dump.Dump
	}
	return webui.Serve(ctx, res.Profile, webui.Options{
		HostPort: addr, Dumps: dumps, OpenBrowser: browser,
		Ready: func(url string) {
			fmt.Fprintf(cmd.ErrOrStderr(), "jitprof: serving the profile on %s (Ctrl-C ends)\n", url)
		},
	})
}
