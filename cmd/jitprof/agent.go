package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/jitprof/jitprof/internal/agent"
	"github.com/spf13/cobra"
)

func newAgentCmd() *cobra.Command {
	var (
		o     = agent.Options{Window: 10 * time.Second, JITWait: 30 * time.Second}
		event string
		pids  []uint
		quiet bool
		maxMB int64
		jitMB int64
		fp    bool
		graph string
	)
	cmd := &cobra.Command{
		Use:   "agent (--otlp HOST:PORT | --pprof-dir DIR) [flags]",
		Short: "Profile the host continuously and ship a profile every window to an OpenTelemetry Collector",
		Long: `Samples every process (or -p's) until stopped, and every --window turns
the window's samples into a profile named as jitprof report names them:
jitted functions from the runtimes' dumps and perf maps as they were at each
sample's time, native code from its ELF symbols, the kernel from kallsyms.
Processes that start and exit within a window are in it.

Profiles go to an OpenTelemetry Collector as OTLP profiles over gRPC
(--otlp), one resource per process with host.name, process.pid,
process.executable.name and .path, process.command_line, container.id and
process.runtime.name; and/or into --pprof-dir as pprof files, the oldest
removed beyond --pprof-max-mb. A collector that is down does not slow
sampling: up to --buffer windows wait for it, older ones are dropped and
counted (a log line each, and in --status).

Runtimes name their jitted code only when started to write dumps or perf
maps (node --perf-prof, java with jitprof's JVMTI agent, erl +JPperf true);
jitprof record's help lists the variables that do it. --attach-java loads
jitprof's JVMTI agent into the HotSpot JVMs sampled, running or started
later, each once, as jcmd PID JVMTI.agent_load would: off by default, since
it changes every JVM on the host until it exits (a jitdump under its user's
~/.debug/jit, some CPU at each compilation).

Call chains come from frame pointers (-g, on by default). --call-graph
dwarf copies each sample's user registers and stack and unwinds them as
jitprof report does: whole stacks through code built without frame
pointers (CPython's -X perf_jit trampolines, Debian's libc), at about 8 KB
a sample instead of a hundred bytes.

--off-cpu adds the time threads spend off their CPU, blocked or waiting to
run, by the stack they blocked in, as jitprof record --off-cpu: the pprof
files hold report --wall's sample types (wall, cpu, off-cpu, in
nanoseconds), and the collector gets a cpu and an off-cpu profile for each
process. A block under way when a window ends is cut there: each window
counts the time within it, the next the rest. Blocks that began before the
agent started are not counted.`,
		Example: `  jitprof agent --otlp localhost:4317
  jitprof agent --pprof-dir /var/lib/jitprof --window 60s
  jitprof agent -p $(pgrep -n node) --otlp collector:4317 --duration 5m
  jitprof agent --off-cpu --otlp localhost:4317 --window 30s
  jitprof agent --call-graph dwarf --cgroup /system.slice/app.service --pprof-dir /var/lib/jitprof`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			var err error
			if o.Event, o.Pids, err = samplingFlags(event, pids); err != nil {
				return err
			}
			if o.CallGraph, o.StackSize, err = callGraphFlags(fp, graph); err != nil {
				return err
			}
			o.PprofMaxBytes, o.JITCopyMaxBytes = maxMB<<20, jitMB<<20
			o.OffCPU = cmd.Flags().Changed("off-cpu")
			stderr := cmd.ErrOrStderr()
			o.Log = func(msg string) {
				if !quiet {
					fmt.Fprintf(stderr, "jitprof agent: %s %s\n", time.Now().Format(time.TimeOnly), msg)
				}
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			st, err := agent.Run(ctx, o)
			if err != nil {
				return recordError(err)
			}
			o.Log(fmt.Sprintf("stopped: %d windows, %d samples (%d lost), %d sent, %d dropped, %d pprof files",
				st.Windows, st.Samples, st.Lost, st.Sent, st.Dropped, st.PprofFiles))
			if o.OffCPU {
				o.Log(fmt.Sprintf("off-CPU: %d switch-outs with their stacks, %d shorter than %v without; %d blocks under way at a cut not carried over",
					st.Switches, st.ShortSwitches, o.OffCPUMin, st.Uncut))
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.IntVarP(&o.Freq, "freq", "F", agent.DefaultFreq, "samples per second, per CPU (low, for always-on use)")
	f.StringVarP(&event, "event", "e", "", "the `EVENT` to sample, as jitprof record's -e")
	f.BoolVarP(&fp, "frame-pointers", "g", true, "record call chains by frame pointers, as jitprof record -g (-g=false: the sampled address only)")
	f.StringVar(&graph, "call-graph", "", "record call chains: `MODE` fp (frame pointers, the default) or dwarf[,SIZE] (user registers and SIZE bytes of user stack a sample, default 8192, unwound by the code's unwind tables: whole stacks through code without frame pointers, such as CPython's, at about 100 times the bytes a sample)")
	f.Var(durationFlag{&o.OffCPUMin}, "off-cpu", "also record every switch of the threads off and onto a CPU, with the stack where each blocked: each window's profile holds cpu and off-cpu time (pprof's wall-clock sample types; OTLP: a cpu and an off-cpu profile per process); the stacks of blocks shorter than `MIN` (100us for --off-cpu alone; 0 keeps all) are left out, their time kept")
	f.Lookup("off-cpu").NoOptDefVal = "100us"
	f.UintSliceVarP(&pids, "pid", "p", nil, "sample these processes, their threads and children, instead of every process")
	f.StringVar(&o.Cgroup, "cgroup", "", "profile only the processes in this cgroup or below it (`PATH` as /proc/PID/cgroup gives it, e.g. /system.slice/docker-ID.scope)")
	f.Var(durationFlag{&o.Window}, "window", "each profile covers this long")
	f.Var(durationFlag{&o.Duration}, "duration", "stop after this long; 0 runs until SIGINT or SIGTERM")
	f.StringVar(&o.OTLP, "otlp", "", "send OTLP profiles to the collector's OTLP/gRPC receiver at `HOST:PORT` (usually :4317)")
	f.IntVar(&o.Buffer, "buffer", 30, "windows kept for the collector while it cannot be reached")
	f.StringVar(&o.PprofDir, "pprof-dir", "", "write each window's profile into `DIR` as jitprof-TIME-SEQ.pb.gz")
	f.Int64Var(&maxMB, "pprof-max-mb", 512, "keep --pprof-dir's profiles within this many MiB, removing the oldest")
	f.Var(durationFlag{&o.JITWait}, "jit-wait", "how long a window waits, at most, for the dumps its jitted samples need (runtimes such as V8 buffer them)")
	f.Int64Var(&jitMB, "jit-copy-max-mb", 256, "keep the copies of perf maps (timed) and containers' dumps within this many MiB, removing exited processes' oldest first")
	f.BoolVarP(&o.Force, "force", "f", false, "read perf maps and dumps that neither their process's owner nor root owns (perf's -f); symlinks, FIFOs and sparse files are refused still")
	f.StringVar(&o.Status, "status", "", "rewrite `FILE` after each window with the agent's counters (JSON)")
	f.StringVar(&o.KeepWindows, "keep-windows", "", "keep each window's perf.data in `DIR` (for jitprof report; debugging)")
	f.BoolVar(&o.AttachJava, "attach-java", false, "load jitprof's JVMTI agent into the running HotSpot JVMs sampled that write no jitdump, each once: from then on, until it exits, each writes one under its user's ~/.debug/jit")
	f.BoolVarP(&quiet, "quiet", "q", false, "no log lines")
	return cmd
}
