package main

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/pprof/profile"
	"github.com/jitprof/jitprof/internal/perfprof"
	"github.com/jitprof/jitprof/internal/atomicfile"
	"github.com/jitprof/jitprof/internal/gmon"
	"github.com/jitprof/jitprof/perfdata"
	"github.com/spf13/cobra"
)

// stageFlags is report's --stage: parts of the run reported on their own.
type stageFlags struct{ specs []string }

func (s *stageFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringArrayVar(&s.specs, "stage", nil, "report the stage `NAME=START,END` (seconds from the first sample; either may be empty), or the stage NAME the program marked in its dump; repeatable: one report, or one gmon file, per stage")
}

// stage is one --stage.
type stage struct {
	name string
	// marked: the program's own stage, from its dump's marks; else the
	// times, relative to the first sample (end 0: no bound).
	marked     bool
	start, end uint64
}

func parseStages(specs []string) ([]stage, error) {
	var out []stage
	seen := make(map[string]bool)
	for _, spec := range specs {
		name, times, timed := strings.Cut(spec, "=")
		if name == "" || strings.ContainsAny(name, "/\x00") || name == "." || name == ".." {
			return nil, fmt.Errorf("--stage %q: a stage needs a name that can end a file name", spec)
		}
		if seen[name] {
			return nil, fmt.Errorf("--stage %q: stage %s is given twice", spec, name)
		}
		seen[name] = true
		st := stage{name: name, marked: !timed}
		if timed {
			var err error
			if st.start, st.end, err = parseTimeRange(times); err != nil {
				return nil, fmt.Errorf("--stage %q: %w", spec, err)
			}
		}
		out = append(out, st)
	}
	return out, nil
}

// firstSampleTime reads when the recording's first sample was taken, from
// the HEADER_SAMPLE_TIME section perf record writes.
func firstSampleTime(path string) (uint64, error) {
	f, err := perfdata.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	for _, ft := range f.Features() {
		if ft.ID == perfdata.FeatureSampleTime {
			if len(ft.Data) < 16 {
				return 0, fmt.Errorf("%s: the sample-time section at offset %#x has %d bytes, not 16", path, ft.Offset, len(ft.Data))
			}
			return binary.LittleEndian.Uint64(ft.Data), nil
		}
	}
	return 0, fmt.Errorf("%s has no sample-time section, so --stage times cannot be placed: give absolute times with --time", path)
}

// run runs the report once per stage: it narrows the sample filter to
// each stage in turn and hands the results, in --stage order, to out.
// Without stages it runs once, unnamed.
func (s *stageFlags) run(cmd *cobra.Command, samples *sampleFlags, out func(names []string, results []*perfprof.Result) error) error {
	stages, err := parseStages(s.specs)
	if err != nil {
		return &exitError{code: 2, err: err}
	}
	if len(stages) == 0 {
		res, err := samples.analyze(cmd)
		if err != nil {
			return err
		}
		defer res.Close()
		return out([]string{""}, []*perfprof.Result{res})
	}
	if err := samples.setFilter(); err != nil {
		return err
	}
	flt := &samples.opts.Filter
	userStart, userEnd := flt.Start, flt.End
	var first uint64
	var names []string
	var results []*perfprof.Result
	defer func() {
		for _, r := range results {
			r.Close()
		}
	}()
	for _, st := range stages {
		flt.Start, flt.End, flt.Stage = userStart, userEnd, ""
		if st.marked {
			flt.Stage = st.name
		} else {
			if first == 0 {
				if first, err = firstSampleTime(samples.opts.Input); err != nil {
					return &exitError{code: 1, err: err}
				}
			}
			flt.Start = max(first+st.start, userStart)
			if st.end != 0 && (flt.End == 0 || first+st.end < flt.End) {
				flt.End = first + st.end
			}
			if flt.End != 0 && flt.End <= flt.Start {
				return &exitError{code: 2, err: fmt.Errorf("--stage %s: no time is left once --time %s applies", st.name, samples.timeRange)}
			}
		}
		res, err := samples.run(cmd)
		if err != nil {
			return err
		}
		names = append(names, st.name)
		results = append(results, res)
	}
	return out(names, results)
}

// writeStaged writes the reports of several stages as one: text in one
// section per stage, JSON as an array of {"stage", "report"}, folded
// stacks under a root frame "[stage NAME]". One stage is written as it is.
func writeStaged(w io.Writer, format string, names []string, results []*perfprof.Result, write func(io.Writer, *profile.Profile) error) error {
	if len(results) == 1 {
		return write(w, results[0].Profile)
	}
	switch format {
	case "text":
		for i, res := range results {
			if i > 0 {
				fmt.Fprintln(w)
			}
			fmt.Fprintf(w, "# ======== stage %s ========\n", names[i])
			if err := write(w, res.Profile); err != nil {
				return err
			}
		}
		return nil
	case "json":
		type staged struct {
			Stage  string          `json:"stage"`
			Report json.RawMessage `json:"report"`
		}
		var all []staged
		for i, res := range results {
			var b bytes.Buffer
			if err := write(&b, res.Profile); err != nil {
				return err
			}
			all = append(all, staged{names[i], b.Bytes()})
		}
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(all)
	case "folded":
		bw := bufio.NewWriter(w)
		for i, res := range results {
			var b bytes.Buffer
			if err := write(&b, res.Profile); err != nil {
				return err
			}
			for line := range strings.Lines(b.String()) {
				fmt.Fprintf(bw, "[stage %s];%s", names[i], line)
			}
		}
		return bw.Flush()
	}
	return fmt.Errorf("--format %s writes one stage at a time, not %d", format, len(results))
}

// writeGmon writes the results, one per stage, into dir for gprof: a
// histogram file per stage (gmon.out, or gmon.out.NAME for stage NAME) and
// the symbol file they share, an ELF file or, for kaffe-as, Kaffe's
// assembler file (with Kaffe's file names, xgmon.out and
// kaffe-jit-symbols.s).
func writeGmon(dir, format string, names []string, results []*perfprof.Result) ([]string, error) {
	prog, profiles, err := gmon.FromResults(results...)
	if err != nil {
		return nil, err
	}
	machine, order, err := gmon.HostMachine()
	if err != nil {
		return nil, err
	}
	layout := prog.Layout(profiles...)
	histName, symName := "gmon.out", "jitprof-symbols"
	writeSyms := func(w io.Writer) error { return prog.WriteELF(w, machine, order, layout) }
	if format == "kaffe-as" {
		histName, symName = "xgmon.out", "kaffe-jit-symbols.s"
		writeSyms = func(w io.Writer) error { return prog.WriteAssembler(w, layout) }
	}
	var written []string
	path := filepath.Join(dir, symName)
	if err := atomicfile.Write(path, writeSyms); err != nil {
		return nil, err
	}
	written = append(written, path)
	for i, prof := range profiles {
		path := filepath.Join(dir, histName)
		if names[i] != "" {
			path += "." + names[i]
		}
		if err := atomicfile.Write(path, func(w io.Writer) error { return gmon.WriteGmon(w, order, layout, prof) }); err != nil {
			return nil, err
		}
		written = append(written, path)
	}
	return written, nil
}

// report writes the report of each stage: gprof's files into the directory
// output, or the other formats through write, to output or standard
// output.
func (s *stageFlags) report(cmd *cobra.Command, samples *sampleFlags, format, output string, serving bool, write func(io.Writer, *profile.Profile) error) error {
	forGprof := format == "gmon" || format == "kaffe-as"
	switch {
	case serving:
		return &exitError{code: 2, err: fmt.Errorf("--http serves one profile: use --time or --symbol rather than --stage")}
	case forGprof && output == "":
		return &exitError{code: 2, err: fmt.Errorf("--format %s writes several files: give -o DIR", format)}
	case forGprof:
		// The symbol file needs each function's extent and code_index,
		// which only the frames tell.
		samples.opts.ProfileOnly, samples.opts.PerFunction = false, false
	}
	return s.run(cmd, samples, func(names []string, results []*perfprof.Result) error {
		if forGprof {
			if err := os.MkdirAll(output, 0o755); err != nil {
				return &exitError{code: 1, err: err}
			}
			written, err := writeGmon(output, format, names, results)
			if err != nil {
				return &exitError{code: 1, err: err}
			}
			if !samples.quiet {
				fmt.Fprintf(cmd.ErrOrStderr(), "jitprof: wrote %s\n", strings.Join(written, ", "))
			}
			return nil
		}
		if output == "" {
			return writeStaged(cmd.OutOrStdout(), format, names, results, write)
		}
		return atomicfile.Write(output, func(w io.Writer) error { return writeStaged(w, format, names, results, write) })
	})
}
