package main

import (
	"errors"
	"fmt"
	"github.com/jitprof/jitprof/internal/jitwatch"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/jitprof/jitprof/internal/atomicfile"
	"github.com/jitprof/jitprof/internal/record"
	"github.com/spf13/cobra"
)

func newRecordCmd() *cobra.Command {
	var (
		o          record.Options
		event      string
		fp         bool
		graph      string
		pids       []uint
		noEnv      bool
		attachJava bool
		quiet      bool
		jitMB      int64
		defaultF   = 4000 // perf record's default
	)
	cmd := &cobra.Command{
		Use:   "record [flags] (-- COMMAND [ARGS] | -p PID[,PID] | -a)",
		Short: "Sample a command, running processes or the whole system into perf.data, no perf needed",
		Long: `Samples with perf_event_open and writes a standard perf.data file, as
perf record -k mono does: perf report, perf script, perf inject --jit and
jitprof report read it.

A command's environment is set so that JIT runtimes describe their code in a
jitdump without any flag:

  NODE_OPTIONS             += --perf-prof --interpreted-frames-native-stack
  DENO_V8_FLAGS            += --perf-prof,--interpreted-frames-native-stack
  BUN_JSC_useJITDump       =  1
  BUN_JSC_jitDumpDirectory =  the output's directory
  ERL_FLAGS                += +JPperf true
  PYTHON_PERF_JIT_SUPPORT  =  1 (CPython 3.13 and later)
  DOTNET_PerfMapEnabled    =  1
  MONO_ENV_OPTIONS         += --jitmap (a perf map, not a jitdump)
  JITDUMPDIR               =  the output's directory (LLVM, the agents)
  JAVA_TOOL_OPTIONS        += -agentpath:<jitprof's JVMTI agent>, and with
                              -g or --call-graph -XX:+PreserveFramePointer
  INTEL_JIT_PROFILER64     =  <jitprof's JIT API collector> (PHP with
                              opcache.jit_debug=128, LLVM, wasmtime)

The last two only where jitprof was built with its agents (make build).
Values already set are extended (+=), never replaced. --no-runtime-env
leaves the environment alone.

Call chains: -g (--call-graph fp) has the kernel walk frame pointers.
--call-graph dwarf[,SIZE] records each sample's user registers and SIZE
bytes (default 8192) of its user stack, for unwinding afterwards by the
code's unwind tables, as perf record --call-graph dwarf: code built without
frame pointers is unwound too, at about 8.4 KB a sample.

With -p, the processes' existing threads and mappings are read from /proc,
jitdump markers included, so a runtime that was started with --perf-prof
(or one that writes a perf map) has its jitted code named. With -p, a HotSpot
JVM recorded that writes no jitdump gets jitprof's JVMTI agent, as jcmd PID
JVMTI.agent_load would load it, in the background: it writes its dump (under
its user's ~/.debug/jit) from then on, until it exits, its methods compiled
before replayed. --attach-java does the same for -a's JVMs, every one on the
host; --attach-java=false leaves JVMs alone.

Recording ends when the command exits, when the processes do, after
--duration, or on Ctrl-C; the file is then written whole. When the disk
fills, recording stops and the file keeps what reached the disk. A
recording the output file held is kept as FILE.old (perf.data.old), as perf
record keeps it: renamed, never copied, once the new one is written; only a
regular file is kept.`,
		Example: `  jitprof record -g -- node app.js && jitprof report
  jitprof record --call-graph dwarf -- ./app
  jitprof record -F 999 -g -p $(pgrep -n node) --duration 10s
  jitprof record -a --duration 5s -o system.data`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 && (len(pids) > 0 || o.AllCPUs) {
				return errors.New("a command, -p or -a: give only one")
			}
			if len(args) == 0 && len(pids) == 0 && !o.AllCPUs {
				return errors.New("give a command to run (after --), -p PID or -a")
			}
			if len(pids) > 0 && o.AllCPUs {
				return errors.New("-p and -a: give only one")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			var err error
			if o.Event, o.Pids, err = samplingFlags(event, pids); err != nil {
				return err
			}
			if o.CallGraph, o.StackSize, err = callGraphFlags(fp, graph); err != nil {
				return err
			}
			o.Command = args
			o.RuntimeEnv = !noEnv
			// A named process is the user's to change; every JVM on the
			// host is not, unless asked.
			o.AttachJava = len(pids) > 0
			if cmd.Flags().Changed("attach-java") {
				o.AttachJava = attachJava
			}
			o.OffCPU = cmd.Flags().Changed("off-cpu")
			if o.JITCopyMaxBytes = jitMB << 20; jitMB <= 0 {
				return errors.New("--jit-copy-max-mb: must be positive")
			}
			// -o DIR/ (or an existing directory): the recording and the
			// files its command's runtimes wrote, in one place.
			gatherDir := ""
			if fi, err := os.Stat(o.Output); strings.HasSuffix(o.Output, "/") || (err == nil && fi.IsDir()) {
				gatherDir = filepath.Clean(o.Output)
				// It holds other processes' files: private, and checked
				// as every output directory is.
				if err := atomicfile.MkdirAll(gatherDir, 0o700); err != nil {
					return &exitError{code: 1, err: err}
				}
				o.Output = filepath.Join(gatherDir, "perf.data")
			}
			o.Stdin, o.Stdout, o.Stderr = os.Stdin, cmd.OutOrStdout(), cmd.ErrOrStderr()
			o.Cmdline = os.Args
			stderr := cmd.ErrOrStderr()
			o.Note = func(msg string) {
				if !quiet {
					fmt.Fprintln(stderr, "jitprof:", msg)
				}
			}
			kept, err := keepOld(o.Output)
			if err != nil {
				return &exitError{code: 1, err: err}
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			res, err := record.Run(ctx, o)
			old, keepErr := kept.settle()
			if keepErr != nil {
				fmt.Fprintln(stderr, "jitprof:", keepErr)
			}
			if err != nil {
				return recordError(err)
			}
			// Before the summary, whose lines would push it out of sight:
			// a command that could not run (127) is why a recording
			// holds next to nothing.
			if res.ExitCode > 0 {
				fmt.Fprintf(stderr, "jitprof: %s exited with status %d%s\n", args[0], res.ExitCode, exitMeaning(res.ExitCode))
			}
			var gathered []string
			if gatherDir != "" && len(args) > 0 {
				wd, err := os.Getwd()
				if err == nil {
					gathered, err = record.Gather(o.Output, gatherDir, wd, record.GatherOptions{MaxBytes: o.JITCopyMaxBytes, Force: o.Force, Note: o.Note})
				}
				if err != nil {
					return &exitError{code: 1, err: fmt.Errorf("gathering the runtimes' files into %s: %w", gatherDir, err)}
				}
			}
			if !quiet {
				lost := "none lost"
				if res.Lost > 0 {
					lost = fmt.Sprintf("the kernel lost %d (larger ring buffers, -m, keep them)", res.Lost)
				}
				size := ""
				if st, err := os.Stat(o.Output); err == nil {
					size = fmt.Sprintf(" (%.1f MB", float64(st.Size())/1e6)
					if o.CallGraph == record.DWARF && res.Samples > 0 {
						size += fmt.Sprintf(", %.1f KB a sample", float64(st.Size())/1e3/float64(res.Samples))
					}
					size += ")"
				}
				if old != "" {
					size += "; the previous recording is now " + old
				}
				fmt.Fprintf(stderr, "jitprof: %d %s samples in %.2f s, %s; wrote %s%s\n",
					res.Samples, res.Event, res.Elapsed.Seconds(), lost, o.Output, size)
				if o.OffCPU {
					fmt.Fprintf(stderr, "jitprof: %d of the samples are switch-outs (off-CPU stacks); %d shorter than %v left out, their time kept by the switch records\n",
						res.Switches, res.Short, o.OffCPUMin)
				}
				if len(gathered) > 0 {
					fmt.Fprintf(stderr, "jitprof: with it in %s: %s\n", gatherDir, strings.Join(baseNames(gathered), ", "))
				}
			}
			if res.ExitCode > 0 {
				return &exitError{code: res.ExitCode}
			}
			return nil
		},
	}
	f := cmd.Flags()
	// Flags after the command are the command's.
	f.SetInterspersed(false)
	f.IntVarP(&o.Freq, "freq", "F", defaultF, "samples per second, per thread and CPU")
	f.StringVarP(&event, "event", "e", "", "the `EVENT` to sample: cycles, instructions, cpu-clock, task-clock... with :u for user space only (default cycles where the hardware counts them, else cpu-clock)")
	f.BoolVarP(&fp, "frame-pointers", "g", false, "record call chains by frame pointers: --call-graph fp")
	f.StringVar(&graph, "call-graph", "", "record call chains: `MODE` fp (frame pointers) or dwarf[,SIZE] (user registers and SIZE bytes of user stack a sample, default 8192, at most 65528, for unwinding by the code's unwind tables)")
	f.StringVarP(&o.Output, "output", "o", "perf.data", "write to `FILE`; to DIR/perf.data when it names a directory (an existing one, or ending in /), and with a command, the dumps, perf maps and V8 logs its runtimes wrote are moved there too, so the directory travels")
	f.Var(durationFlag{&o.Duration}, "duration", "stop after this long, in seconds (1.5) or as 10s, 2m (a command still running is sent SIGTERM)")
	f.UintSliceVarP(&pids, "pid", "p", nil, "record these running processes, all their threads")
	f.BoolVarP(&o.AllCPUs, "all-cpus", "a", false, "record every process on every CPU")
	f.IntVarP(&o.Pages, "mmap-pages", "m", 0, "each CPU's ring buffer, in `PAGES` (a power of two; default 128, with --call-graph dwarf 512); more keeps bursts from being lost")
	f.BoolVar(&noEnv, "no-runtime-env", false, "do not set the variables that make JIT runtimes write jitdumps")
	f.BoolVar(&attachJava, "attach-java", false, "load jitprof's JVMTI agent into the HotSpot JVMs recorded that write no jitdump, each once, as jcmd PID JVMTI.agent_load does: from then on, until it exits, each writes one under its user's ~/.debug/jit (default: with -p, not with -a; --attach-java=false for none)")
	f.Int64Var(&jitMB, "jit-copy-max-mb", jitwatch.DefaultCopyMaxBytes>>20, "bound the copies of the processes' perf maps and dumps beside the recording to this many MiB in all; a copy that would pass it is cut, and said")
	f.BoolVarP(&o.Force, "force", "f", false, "copy perf maps and dumps that neither their process's owner nor root owns (perf's -f); symlinks, FIFOs and sparse files are refused still")
	f.BoolVarP(&quiet, "quiet", "q", false, "no notes and no summary")
	f.Var(durationFlag{&o.OffCPUMin}, "off-cpu", "also record every switch of the threads off and onto a CPU, with the stack where each blocked, for report's off-CPU and wall-clock views; the stacks of blocks shorter than `MIN` (100us for --off-cpu alone; 0 keeps all) are left out, their time kept")
	f.Lookup("off-cpu").NoOptDefVal = "100us"
	return cmd
}

// baseNames returns the last element of each path.
func baseNames(paths []string) []string {
	names := make([]string, len(paths))
	for i, p := range paths {
		names[i] = filepath.Base(p)
	}
	return names
}

// exitMeaning says what a shell's statuses for a command it could not run
// mean, for the status line; "" for any other status.
func exitMeaning(code int) string {
	switch code {
	case 127:
		return ": command not found (the status a shell, or a wrapper such as a pyenv or asdf shim with no version selected, exits with when it finds no command to run; its message is above)"
	case 126:
		return ": command not executable (the status a shell exits with when it finds a command but cannot run it; its message is above)"
	}
	return ""
}
