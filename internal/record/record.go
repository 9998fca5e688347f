// Package record samples processes with perf_event_open and writes what
// the kernel reports as a standard perf.data file, as perf record does:
// for a command it starts (inheriting to its threads and children), for
// processes already running (their existing threads and mappings described
// from /proc, jitdump markers included), or for the whole system.
//
// Events are timed with CLOCK_MONOTONIC, jitdump's clock, so that samples
// of jitted code can be matched with the dumps the runtimes write; a
// recorded command's environment makes the common JIT runtimes write one.
//
// The kernel interface (perf.go, ring.go) is kept apart from the
// description of existing processes (proc.go) and from the environment
// (env.go); this file ties them together.
package record

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"math/bits"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/jitprof/jitprof/agents"
	"github.com/jitprof/jitprof/internal/hostelf"
	"github.com/jitprof/jitprof/internal/jitsources"
	"github.com/jitprof/jitprof/internal/jitwatch"
	"github.com/jitprof/jitprof/internal/procfs"
	"github.com/jitprof/jitprof/internal/runtimes"
	"github.com/jitprof/jitprof/perfdata"
)

// Options say what to record and where.
type Options struct {
	Output string
	// Freq is the sampling frequency, per thread and CPU, in Hz.
	Freq int
	// Event is what to sample; nil picks DefaultEvent.
	Event *Event
	// CallGraph says how each sample's call chain is recorded.
	CallGraph CallGraph
	// StackSize is, for a DWARF call graph, how many bytes of user stack
	// each sample copies (a multiple of 8, at most MaxStackSize); 0 picks
	// DefaultStackSize.
	StackSize uint32
	// Duration ends the recording after that long; 0 waits for the
	// command or the processes to end, or ctx.
	Duration time.Duration

	// One of the three: a command to start, processes to attach to, or
	// every CPU.
	Command []string
	Pids    []int
	AllCPUs bool

	// RuntimeEnv sets the variables that make JIT runtimes describe their
	// code in the command's environment.
	RuntimeEnv bool
	// Env is the command's environment before that; nil means os.Environ.
	Env            []string
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	Cmdline        []string     // the recorder's, for the file's header
	Note           func(string) // receives notes for the user, such as which event is sampled
	// Pages is the size of each CPU's ring buffer in pages, a power of
	// two; 0 picks 128 (512 KiB), or for a DWARF call graph 512 (2 MiB),
	// less if the locked-memory limit refuses that.
	Pages int

	// JITCopyMaxBytes bounds the disk the copies of the processes' perf
	// maps and dumps beside the output use (see jitwatch.Watcher); 0 picks
	// jitwatch.DefaultCopyMaxBytes, -1 none.
	JITCopyMaxBytes int64
	// Force copies perf maps and dumps their process's owner or root does
	// not own, as perf's -f.
	Force bool
	// Proc is the /proc read; "" is the host's (tests give their own).
	Proc procfs.FS

	// OffCPU records, besides the samples, every switch of the threads
	// off and back onto a CPU, with the stack at each switch-out (see
	// offcpu.go); the stacks of intervals shown shorter than OffCPUMin
	// are left out.
	OffCPU    bool
	OffCPUMin time.Duration

	// AttachJava loads jitprof's JVMTI agent into the HotSpot JVMs among
	// the processes recorded with Pids or AllCPUs (see attach.go), each
	// wait of an attach bounded by AttachTimeout (0: hotspot's default).
	AttachJava    bool
	AttachTimeout time.Duration
}

// proc is o's /proc.
func (o *Options) proc() procfs.FS {
	if o.Proc == "" {
		return procfs.Host
	}
	return o.Proc
}

// jitCopyMax is o's bound on the copies of perf maps and dumps, 0 for none.
func (o *Options) jitCopyMax() int64 {
	switch {
	case o.JITCopyMaxBytes == 0:
		return jitwatch.DefaultCopyMaxBytes
	case o.JITCopyMaxBytes < 0:
		return 0
	}
	return o.JITCopyMaxBytes
}

// Result says what was recorded.
type Result struct {
	Event   string
	Samples uint64 // samples written, switch-outs included
	// Switches counts the switch-out samples written (OffCPU), Short
	// those left out as shorter than OffCPUMin.
	Switches, Short uint64
	Lost            uint64 // samples the kernel dropped (LOST records)
	// FullStacks counts, with a DWARF call graph, the samples whose copy
	// of the user stack was full: their outermost frames may be cut off,
	// or not, as the process's arguments, environment and a random offset
	// of up to 8 KiB lie above main's frame (qsort_cmp's copies of 8192
	// bytes: from 0 to all of them full, run to run, every one unwound).
	FullStacks uint64
	// StackSize is the size of each sample's stack copy, as asked for.
	StackSize uint32
	// ExitCode is the command's exit status when it ended on its own, -1
	// otherwise.
	ExitCode int
	// CPUTime is the user and system time of the command and the children
	// it waited for; 0 without a command.
	CPUTime time.Duration
	Elapsed time.Duration
	// Java counts the JVMs AttachJava came across.
	Java AttachStats
}

// ErrNoSpace is matched by the error of a recording the disk had no room
// for: the file keeps the records that reached it.
var ErrNoSpace = errors.New("no space left on device")

// Ring buffer sizes, in pages. Samples with a DWARF call graph are 8 KiB
// and more: 512 KiB would be half full after 32 of them. Off-CPU, a sample
// and two switch records at every switch, 50,000 a second, fill 256 KiB in
// about 10 ms, less than a busy machine may leave the reader waiting.
const (
	defaultPages = 128
	dwarfPages   = 512
)

var le = binary.LittleEndian

// Now is the time on a recording's clock, CLOCK_MONOTONIC, in
// nanoseconds; it cannot fail to be read.
func Now() uint64 {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return uint64(ts.Nano())
}

// launcher is the shell a command starts under: it waits for the go-ahead
// on fd 3, so that the events are opened on it before it execs the command
// (Go cannot act between fork and exec), then becomes the command. When
// the recorder gives up, fd 3 closes unwritten and the command never runs.
const launcher = `read -r _ <&3 || exit 127; exec "$@" 3<&-`

// session is one recording under way.
type session struct {
	o      Options
	attr   *perfdata.Attr
	offCPU *perfdata.Attr // the switch event's, with OffCPU
	filter *switchFilter  // with OffCPUMin
	// switchIDs are offCPU's event ids.
	switchIDs map[uint64]bool
	fds       []int
	rings     []*ring
	w         *perfdata.Writer
	scratch   []byte
	heads     []uint64 // each ring's, while a drain looks through them twice
	res       Result
	round     bool // records written since the last FINISHED_ROUND
	final     bool // the last drain, after the events are disabled
	// firstSample and lastSample are the times of the samples written,
	// for HEADER_SAMPLE_TIME (report --stage places stages from the
	// first); lastSample is 0 until one is.
	firstSample, lastSample uint64

	cmd     *exec.Cmd
	cmdDone chan struct{} // closed when the command has been waited for
	quit    chan struct{} // closed to end the watcher
	watcher chan struct{} // closed when the watcher has ended
	goAhead *os.File      // the command's go-ahead
	wake    int           // eventfd that interrupts poll
	jit     *jitwatch.Watcher
	java    *JavaAttacher // nil unless AttachJava
	// marked are the processes whose jitdump marker mapping the
	// recording holds, for the JVMs the attacher loaded the agent into.
	marked map[uint32]bool
}

// Run records until the command ends, the processes exit, Duration passes
// or ctx is done, and writes the file whole; when the disk fills, the file
// keeps what reached it and the error matches ErrNoSpace.
func Run(ctx context.Context, o Options) (*Result, error) {
	if n := btoi(len(o.Command) > 0) + btoi(len(o.Pids) > 0) + btoi(o.AllCPUs); n != 1 {
		return nil, errors.New("record a command, processes (-p) or every CPU (-a): exactly one")
	}
	ev, ac, cpus, err := o.prepare()
	if err != nil {
		return nil, err
	}

	s := &session{o: o, wake: -1, res: Result{Event: ev.Name, ExitCode: -1, StackSize: ac.stackSize}}
	defer s.release()
	if s.wake, err = unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK); err != nil {
		return nil, fmt.Errorf("eventfd: %w", err)
	}
	var tids []int
	switch {
	case len(o.Command) > 0:
		if err := s.start(); err != nil {
			return nil, err
		}
		tids = []int{s.cmd.Process.Pid}
	case len(o.Pids) > 0:
		if tids, err = threadsOf(o.proc(), o.Pids); err != nil {
			return nil, err
		}
	default:
		tids = []int{-1}
	}
	ac.onExec = s.cmd != nil
	if err := s.openAll(ev, ac, cpus, tids); err != nil {
		return nil, err
	}
	s.prepareOffCPU()
	if s.w, err = perfdata.Create(o.Output, perfdata.Options{Attrs: s.attrs(), Features: s.features(cpus)}); err != nil {
		return nil, err
	}
	if o.AttachJava && s.cmd == nil {
		s.java = AttachJava(ctx, JavaOptions{Timeout: o.AttachTimeout, Proc: o.Proc, Note: o.Note})
		s.marked = make(map[uint32]bool)
	}
	sy := synthesizer{proc: o.proc(), attr: s.attr, emit: s.writeRecord}
	if err := s.synthesize(&sy); err != nil {
		return s.fail(err)
	}

	roots := o.Pids
	if s.cmd != nil {
		roots = []int{s.cmd.Process.Pid}
	}
	s.jit = jitwatch.Watch(filepath.Dir(o.Output), roots, jitwatch.Options{Proc: o.proc(), MaxBytes: o.jitCopyMax(), Force: o.Force, Note: o.Note})

	begin := time.Now()
	stop := s.watch(ctx)
	if s.cmd != nil {
		if _, err := s.goAhead.WriteString("\n"); err != nil {
			return s.fail(fmt.Errorf("starting %s: %w", o.Command[0], err))
		}
		s.goAhead.Close()
		s.goAhead = nil
	}
	err = s.loop(stop)
	for _, fd := range s.fds {
		unix.IoctlSetInt(fd, unix.PERF_EVENT_IOC_DISABLE, 0)
	}
	if err == nil {
		s.final = true
		err = s.drain()
	}
	s.res.Short = s.filter.shortCount()
	if s.java != nil {
		// Before the JIT watcher's last look: a dump is copied once its
		// JVM maps it.
		if s.res.Java = s.java.Stop(); s.res.Java != (AttachStats{}) {
			o.Note(s.res.Java.String())
		}
		if err == nil {
			err = s.writeLostMarkers(s.java.TakeLoaded())
		}
	}
	if _, jerr := s.jit.Stop(); jerr != nil {
		o.Note(fmt.Sprintf("copying the runtimes' perf maps and dumps: %v", jerr))
	}
	s.res.Elapsed = time.Since(begin)
	if err != nil {
		return s.fail(err)
	}
	if s.lastSample != 0 {
		if err := s.w.AddFeature(perfdata.SampleTimeFeature(s.firstSample, s.lastSample)); err != nil {
			return s.fail(err)
		}
	}
	if err := s.w.Close(); err != nil {
		return s.fail(err)
	}
	s.w = nil
	return &s.res, nil
}

// sampleAt notes the time of a sample written: the rings are drained one
// after the other, so samples are written a round at a time, not in time
// order.
func (s *session) sampleAt(rec []byte) {
	if len(rec) < sampleTimeOff+8 {
		return
	}
	t := le.Uint64(rec[sampleTimeOff:])
	if s.lastSample == 0 || t < s.firstSample {
		s.firstSample = t
	}
	s.lastSample = max(s.lastSample, t)
}

// OptionError is an option's value refused before anything is opened or
// started: the caller's usage error, not a failure to record.
type OptionError struct{ Err error }

func (e *OptionError) Error() string { return e.Err.Error() }
func (e *OptionError) Unwrap() error { return e.Err }

// prepare checks o's frequency, ring buffer size and stack copies, and
// returns the event to sample, the attr's configuration and the CPUs to
// sample on; Run and OpenStream share it.
func (o *Options) prepare() (Event, attrConfig, []int, error) {
	if err := checkFreq(o.Freq); err != nil {
		return Event{}, attrConfig{}, nil, &OptionError{err}
	}
	if o.Pages < 0 || o.Pages&(o.Pages-1) != 0 {
		return Event{}, attrConfig{}, nil, &OptionError{fmt.Errorf("ring buffer of %d pages: not a power of two", o.Pages)}
	}
	ac := attrConfig{freq: o.Freq, callGraph: o.CallGraph, inherit: !o.AllCPUs}
	if o.CallGraph == DWARF {
		if o.StackSize == 0 {
			o.StackSize = DefaultStackSize
		}
		if o.StackSize%8 != 0 || o.StackSize > MaxStackSize {
			return Event{}, attrConfig{}, nil, &OptionError{fmt.Errorf("user stack copies of %d bytes: the size must be a multiple of 8 up to %d", o.StackSize, MaxStackSize)}
		}
		machine, _ := hostelf.Machine()
		var err error
		if ac.regs, err = dwarfRegs(machine); err != nil {
			return Event{}, attrConfig{}, nil, err
		}
		ac.stackSize = o.StackSize
	}
	if o.Note == nil {
		o.Note = func(string) {}
	}
	note := o.Note
	ev := Event{}
	if o.Event != nil {
		ev = *o.Event
	} else {
		var msg string
		if ev, msg = DefaultEvent(); msg != "" {
			note(msg)
		}
	}
	if os.Geteuid() != 0 && !ev.ExcludeKernel && paranoia() >= 2 {
		// What perf does too: the kernel refuses more at this level.
		ev.ExcludeKernel = true
		ev.Name += ":u"
		note("sampling user space only: kernel.perf_event_paranoid is 2 or more")
	}
	cpus, err := onlineCPUs()
	return ev, ac, cpus, err
}

// threadsOf lists the threads of processes.
func threadsOf(proc procfs.FS, pids []int) ([]int, error) {
	var tids []int
	sy := synthesizer{proc: proc}
	for _, pid := range pids {
		ts, err := sy.threads(pid)
		if err != nil {
			return nil, err
		}
		tids = append(tids, ts...)
	}
	return tids, nil
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// start starts the command under launcher, waiting for the go-ahead.
func (s *session) start() error {
	o := &s.o
	if _, err := exec.LookPath(o.Command[0]); err != nil {
		return fmt.Errorf("command %s: %w", o.Command[0], err)
	}
	env := o.Env
	if env == nil {
		env = os.Environ()
	}
	if o.RuntimeEnv {
		out, err := filepath.Abs(o.Output)
		if err != nil {
			return err
		}
		if env, err = runtimes.Env(env, runtimes.Context{DumpDir: filepath.Dir(out), CallGraph: o.CallGraph != NoCallGraph, Agent: agentLibrary}, o.Note); err != nil {
			return err
		}
	}
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	defer r.Close()
	cmd := exec.Command("/bin/sh", append([]string{"-c", launcher, "sh"}, o.Command...)...)
	cmd.Env = env
	cmd.Stdin, cmd.Stdout, cmd.Stderr = o.Stdin, o.Stdout, o.Stderr
	cmd.ExtraFiles = []*os.File{r}
	if err := cmd.Start(); err != nil {
		w.Close()
		return fmt.Errorf("starting %s: %w", o.Command[0], err)
	}
	s.cmd, s.goAhead = cmd, w
	return nil
}

// openAll opens the events with ring buffers of the size asked for, or by
// default of the size the call graph (or OffCPU) wants, halved down to the usual size
// while the locked-memory limit refuses them.
func (s *session) openAll(ev Event, ac attrConfig, cpus, tids []int) error {
	pages := s.o.Pages
	if pages == 0 {
		pages = defaultPages
		if ac.callGraph == DWARF || s.o.OffCPU {
			pages = dwarfPages
		}
	}
	page := os.Getpagesize()
	for {
		ac.wakeup = uint32(pages * page / 2)
		s.attr = newAttr(ev, ac)
		s.offCPU = s.switchAttr()
		err := s.open(cpus, tids, pages)
		if err == nil {
			return nil
		}
		if s.o.Pages != 0 || pages <= defaultPages || !errors.Is(err, errRingLimit) {
			return err
		}
		s.closeEvents()
		pages /= 2
		s.o.Note(fmt.Sprintf("ring buffers of %d KiB a CPU: the locked-memory limit refuses twice that", pages*page/1024))
	}
}

// open opens the event for each thread (or -1, every process) on each CPU,
// with one ring buffer of pages per CPU that the CPU's other events write
// into.
func (s *session) open(cpus, tids []int, pages int) error {
	for _, cpu := range cpus {
		owner := -1
		for _, tid := range tids {
		events:
			for _, a := range s.attrs() {
				fd, id, err := openEvent(a, tid, cpu)
				if err != nil {
					if errors.Is(err, ErrGone) && len(s.o.Pids) > 0 && !s.pidsGone() {
						break events // a thread of a live process exited meanwhile
					}
					return err
				}
				s.fds = append(s.fds, fd)
				a.IDs = append(a.IDs, id)
				if owner < 0 {
					r, err := mapRing(fd, pages)
					if err != nil {
						return err
					}
					s.rings = append(s.rings, r)
					owner = fd
					continue
				}
				if err := unix.IoctlSetInt(fd, unix.PERF_EVENT_IOC_SET_OUTPUT, owner); err != nil {
					return fmt.Errorf("perf_event_open: sharing CPU %d's ring buffer: %w", cpu, err)
				}
			}
		}
		if owner < 0 {
			return fmt.Errorf("processes %v: %w", s.o.Pids, ErrGone)
		}
	}
	return nil
}

// synthesize describes the kernel, and for processes that already run
// their threads and mappings.
func (s *session) synthesize(sy *synthesizer) error {
	if err := sy.kernel(); err != nil {
		return err
	}
	var pids []int
	switch {
	case len(s.o.Pids) > 0:
		pids = s.o.Pids
	case s.o.AllCPUs:
		var err error
		if pids, err = sy.processes(); err != nil {
			return err
		}
	}
	for _, pid := range pids {
		if err := sy.process(pid); err != nil {
			// Of every process, those that exit meanwhile, or that
			// this user may not read, are left out, as perf does.
			if s.o.AllCPUs && (errors.Is(err, ErrGone) || errors.Is(err, fs.ErrPermission)) {
				continue
			}
			return err
		}
	}
	return nil
}

// watch returns a channel that says why the recording ends, waking poll
// when it does. The watcher ends when the session is released.
func (s *session) watch(ctx context.Context) <-chan string {
	stop := make(chan string, 1)
	if s.cmd != nil {
		s.cmdDone = make(chan struct{})
		go func() {
			s.cmd.Wait()
			close(s.cmdDone)
		}()
	}
	var timeout <-chan time.Time
	var timer *time.Timer
	if s.o.Duration > 0 {
		timer = time.NewTimer(s.o.Duration)
		timeout = timer.C
	}
	s.quit, s.watcher = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(s.watcher)
		if timer != nil {
			defer timer.Stop()
		}
		select {
		case <-ctx.Done():
			stop <- "interrupted"
		case <-timeout:
			stop <- "duration"
		case <-s.cmdDone:
			stop <- "exited"
		case <-s.quit:
			return
		}
		one := [8]byte{1}
		unix.Write(s.wake, one[:])
	}()
	return stop
}

// loop drains the ring buffers whenever the kernel wakes it (a buffer half
// full, or an event whose threads all exited) until stop says why to end.
func (s *session) loop(stop <-chan string) error {
	pfds := []unix.PollFd{{Fd: int32(s.wake), Events: unix.POLLIN}}
	for _, fd := range s.fds {
		pfds = append(pfds, unix.PollFd{Fd: int32(fd), Events: unix.POLLIN})
	}
	live := len(s.fds)
	for {
		// The timeout only matters for -p: a process whose events never
		// hang up is checked on.
		if _, err := unix.Poll(pfds, 1000); err != nil && !errors.Is(err, unix.EINTR) {
			return fmt.Errorf("poll: %w", err)
		}
		if err := s.drain(); err != nil {
			return err
		}
		select {
		case <-stop:
			return nil
		default:
		}
		for i := 1; i < len(pfds); i++ {
			if pfds[i].Revents&(unix.POLLHUP|unix.POLLERR) != 0 {
				pfds[i].Fd = -1 // poll skips it from now on
				live--
			}
		}
		if len(s.o.Pids) > 0 && (live == 0 || s.pidsGone()) {
			return nil
		}
	}
}

// pidsGone tells whether every process attached to has exited.
func (s *session) pidsGone() bool {
	for _, pid := range s.o.Pids {
		if err := unix.Kill(pid, 0); !errors.Is(err, unix.ESRCH) {
			return false
		}
	}
	return true
}

// drain writes what every ring buffer holds, then a FINISHED_ROUND: every
// record after it is newer than those before the previous one.
func (s *session) drain() error {
	if err := s.drainRings(s.writeRaw); err != nil {
		return err
	}
	if s.filter != nil {
		if err := s.filter.flush(s.writeKept, s.final); err != nil {
			return err
		}
		if !s.filter.markDue() {
			return nil
		}
	}
	if !s.round {
		return nil
	}
	s.round = false
	return s.w.WriteRecord(&perfdata.FinishedRound{})
}

func (s *session) writeRaw(rec []byte) error {
	if s.filter != nil && !s.filter.take(rec) {
		return nil
	}
	return s.writeKept(rec)
}

// writeKept writes a record drained, or held and kept by the filter.
func (s *session) writeKept(rec []byte) error {
	switch perfdata.RecordType(le.Uint32(rec)) {
	case perfdata.TypeSample:
		s.res.Samples++
		s.sampleAt(rec)
		s.countSwitch(rec)
		if s.res.StackSize > 0 && fullStack(rec, s.attr) {
			s.res.FullStacks++
		}
	case perfdata.TypeLost:
		if len(rec) >= 24 {
			s.res.Lost += le.Uint64(rec[16:])
		}
	case perfdata.TypeMmap2:
		if s.java != nil {
			if pid, name, ok := mmap2Name(rec); ok {
				s.sawMapping(pid, string(name))
			}
		}
	}
	s.round = true
	return s.w.WriteRaw(rec)
}

func (s *session) writeRecord(rec perfdata.Record) error {
	if m, ok := rec.(*perfdata.Mmap2); ok && s.java != nil {
		s.sawMapping(m.Pid, m.Filename)
	}
	return s.w.WriteRecord(rec)
}

// sawMapping hands a mapping of the recording to the JVMs' attacher, and
// notes a jitdump marker's (writeLostMarkers).
func (s *session) sawMapping(pid uint32, name string) {
	s.java.SawMapping(pid, name)
	if jitsources.IsMarker(name) {
		s.marked[pid] = true
	}
}

// writeLostMarkers writes the jitdump marker mapping of each JVM in loaded
// (the time its agent was loaded, by pid) that the recording lacks, as the
// JVM maps it now, at that time. The kernel drops the records that do not
// fit in a full ring buffer; a small one like the marker's rarely, but
// without it the report never finds the dump and names none of the JVM's
// compiled methods.
func (s *session) writeLostMarkers(loaded map[uint32]uint64) error {
	for _, pid := range slices.Sorted(maps.Keys(loaded)) {
		if s.marked[pid] {
			continue
		}
		ms, err := Markers(s.o.proc(), s.attr, pid, loaded[pid])
		switch {
		case errors.Is(err, ErrGone):
			s.o.Note(fmt.Sprintf("JVM %d: the recording lacks its jitdump's marker (the kernel lost records) and it exited before it could be read again: its compiled methods stay unnamed", pid))
			continue
		case err != nil:
			return err
		}
		for _, m := range ms {
			if err := s.w.WriteRecord(m); err != nil {
				return err
			}
		}
		if len(ms) > 0 {
			s.o.Note(fmt.Sprintf("JVM %d: the recording lacked its jitdump's marker (the kernel lost records): written from /proc/%d/maps", pid, pid))
		}
	}
	return nil
}

// fail ends a recording that went wrong: a full disk keeps what reached
// it, anything else removes the file.
func (s *session) fail(err error) (*Result, error) {
	if s.w == nil {
		return nil, err
	}
	if errors.Is(err, unix.ENOSPC) || errors.Is(err, unix.EDQUOT) {
		w := s.w
		s.w = nil
		if serr := w.Salvage(); serr != nil {
			return nil, fmt.Errorf("%w (%v); %v", ErrNoSpace, err, serr)
		}
		return &s.res, fmt.Errorf("%w writing %s: recording stopped; the file keeps the records that reached the disk", ErrNoSpace, s.o.Output)
	}
	return nil, err
}

// release frees what the session holds, and stops the command if it still
// runs.
func (s *session) release() {
	if s.w != nil {
		s.w.Abort()
	}
	if s.goAhead != nil {
		s.goAhead.Close() // the command never starts
	}
	if s.java != nil {
		s.java.Stop()
	}
	if s.jit != nil {
		s.jit.Stop()
	}
	if s.cmd != nil {
		if s.cmdDone == nil {
			s.cmd.Wait()
		} else {
			select {
			case <-s.cmdDone:
			default:
				// As perf record does when it stops first.
				s.cmd.Process.Signal(syscall.SIGTERM)
				<-s.cmdDone
			}
		}
		if st := s.cmd.ProcessState; st != nil {
			if st.Exited() && s.res.ExitCode < 0 {
				s.res.ExitCode = st.ExitCode()
			}
			s.res.CPUTime = st.UserTime() + st.SystemTime()
		}
	}
	s.closeEvents()
	if s.quit != nil {
		// The watcher may write to wake: it must be done before wake's
		// number can be reused.
		close(s.quit)
		<-s.watcher
	}
	if s.wake >= 0 {
		unix.Close(s.wake)
	}
}

// closeEvents unmaps the ring buffers and closes the events.
func (s *session) closeEvents() {
	for _, r := range s.rings {
		r.close()
	}
	for _, fd := range s.fds {
		unix.Close(fd)
	}
	s.rings, s.fds = nil, nil
	for _, a := range s.attrs() {
		a.IDs = nil
	}
}

// fullStack tells whether rec, a sample of a's event as newAttr lays it out
// for a DWARF call graph, has a copy of the user stack that the stack
// filled (dyn_size equal to its size). It walks the fields itself rather
// than decode the sample: it runs for every sample recorded.
func fullStack(rec []byte, a *perfdata.Attr) bool {
	// identifier, ip, pid/tid, time, cpu, period, then the callchain
	off := uint64(perfdata.RecordHeaderSize + 6*8)
	word := func() (uint64, bool) {
		if off+8 > uint64(len(rec)) {
			return 0, false
		}
		v := le.Uint64(rec[off:])
		off += 8
		return v, true
	}
	nr, ok := word()
	if !ok || nr > uint64(len(rec))/8 {
		return false
	}
	off += 8 * nr
	abi, ok := word()
	if !ok {
		return false
	}
	if abi != perfdata.RegsABINone {
		off += 8 * uint64(bits.OnesCount64(a.SampleRegsUser))
	}
	size, ok := word()
	if !ok || size == 0 {
		return false
	}
	off += size
	dyn, ok := word()
	return ok && dyn == size
}

// features are the header's: the machine, the command line and the event's
// name.
func (s *session) features(cpus []int) []perfdata.Feature {
	var u unix.Utsname
	unix.Uname(&u)
	host, _ := os.Hostname()
	fs := []perfdata.Feature{
		perfdata.StringFeatureOf(perfdata.FeatureHostname, host),
		perfdata.StringFeatureOf(perfdata.FeatureOSRelease, unix.ByteSliceToString(u.Release[:])),
		perfdata.StringFeatureOf(perfdata.FeatureArch, unix.ByteSliceToString(u.Machine[:])),
		perfdata.NrCPUsFeature(uint32(possibleCPUs(len(cpus))), uint32(len(cpus))),
		perfdata.CmdlineFeature(s.o.Cmdline),
		perfdata.ClockDataFeature(clockData()),
	}
	if ed, err := perfdata.EventDescFeature(s.attrs(), s.eventNames()); err == nil {
		fs = append(fs, ed)
	}
	return fs
}

// clockData reads the samples' clock (CLOCK_MONOTONIC, perf.go) and the
// wall clock at one moment: with it a report tells a recording of this
// boot of this machine, whose processes it may look for among the live
// ones, from one of another, whose pids name unrelated processes here.
func clockData() perfdata.ClockData {
	var before, after unix.Timespec
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &before)
	wall := time.Now().UnixNano()
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &after)
	return perfdata.ClockData{ClockID: unix.CLOCK_MONOTONIC, WallNs: uint64(wall), ClockNs: uint64((before.Nano() + after.Nano()) / 2)}
}

// paranoia returns kernel.perf_event_paranoid, or 2 when unreadable.
func paranoia() int {
	b, err := os.ReadFile(paranoidFile)
	if err != nil {
		return 2
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 2
	}
	return n
}

// agentLibrary hands out the agents' libraries to the runtimes' variables.
func agentLibrary(a runtimes.Agent) (string, error) {
	switch a {
	case runtimes.JVMTI:
		return agents.Library(agents.JVMTI)
	case runtimes.IttJIT:
		return agents.Library(agents.IttJIT)
	}
	return "", fmt.Errorf("no agent %d", a)
}
