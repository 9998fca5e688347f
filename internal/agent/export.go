package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/jitprof/jitprof/internal/jitwatch"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/google/pprof/profile"
	"go.opentelemetry.io/collector/pdata/pprofile"
	"go.opentelemetry.io/collector/pdata/pprofile/pprofileotlp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/encoding/gzip"

	"golang.org/x/sys/unix"

	"github.com/jitprof/jitprof/internal/atomicfile"
	"github.com/jitprof/jitprof/internal/jitsources"
	"github.com/jitprof/jitprof/internal/otlpprof"
	"github.com/jitprof/jitprof/internal/perfprof"
	"github.com/jitprof/jitprof/internal/symbolize"
	"github.com/jitprof/jitprof/jitdump"
)

// symbolizer turns finished windows into profiles and hands them to the
// sinks.
type symbolizer struct {
	o     Options
	c     *counters
	host  string
	sinks []sink
	keep  bool
	// warned holds the warnings already logged, so that a dump missing
	// in every window is said once; cleared when it grows past a bound.
	warned map[string]bool
	dumps  *dumpWatch
	jit    *jitwatch.Watcher // its copies of the processes a window drops go after it
	dir    string            // of the windows and the watcher's copies
	tables *symbolize.TableCache
	// jitDumps keeps each live process's dump indexed from window to
	// window, extended with what was appended, not read again.
	jitDumps *jitsources.DumpCache
	stopping chan struct{} // closed when sampling has stopped
	stopBy   time.Time     // when the windows left stop waiting, once stopping
}

// tablesKept is how many windows a symbol table no window needs is kept.
const tablesKept = 6

// dumpsKept is how many windows a dump no window read is kept indexed: one,
// since a dump is read by every window while its process lives.
const dumpsKept = 1

const maxWarned = 1000

func (y *symbolizer) run(queue <-chan *window) {
	y.warned = make(map[string]bool)
	y.tables = symbolize.NewTableCache()
	defer y.tables.Close()
	y.jitDumps = jitsources.NewDumpCache()
	defer y.jitDumps.Close()
	for w := range queue {
		y.await(w)
		y.dumps.forget(w.seq - 1)
		y.window(w)
		y.jit.Drop(w.exited)
		y.tables.Sweep(tablesKept)
		y.jitDumps.Sweep(dumpsKept)
		if !y.keep {
			os.Remove(w.path)
		}
		y.c.read.Store(w.seq)
		y.c.writeStatus(y.o.Status)
	}
}

func (y *symbolizer) window(w *window) {
	opts := perfprof.Options{Input: w.path, Options: symbolize.Options{Warn: y.warn, Tables: y.tables, Dumps: y.jitDumps, Host: jitsources.Host{Force: y.o.Force}}}
	if y.o.OffCPU {
		opts.View = perfprof.WallView
	}
	if y.o.Cgroup != "" {
		if len(w.pids) == 0 {
			return // nothing of the cgroup ran
		}
		opts.Filter.Pids = w.pids
	}
	res, err := perfprof.Run(opts)
	if err != nil {
		y.o.Log(fmt.Sprintf("window %d: %v", w.seq, err))
		return
	}
	p := res.Profile.PProf()
	p.TimeNanos = w.start.UnixNano()
	p.DurationNanos = w.end.Sub(w.start).Nanoseconds()
	p.Comments = append(p.Comments, fmt.Sprintf("jitprof agent window %d", w.seq))
	y.c.profiled.Add(1)
	for _, sk := range y.sinks {
		sk.put(w, p, y.host)
	}
}

// stopGrace is how long windows still wait for dumps once the agent stops.
const stopGrace = 2 * time.Second

// await returns once every dump w needs has caught up with it, or its
// time to wait has passed.
func (y *symbolizer) await(w *window) {
	deadline := w.end.Add(y.o.JITWait)
	pending := w.waits
	// The copies of perf maps and containers' files as they were at the
	// window's end, at least: a look of the watcher after it.
	for y.jit.Looked() < w.endMono && time.Now().Before(deadline) {
		time.Sleep(jitwatch.LiveWatchInterval / 4)
	}
	for {
		pending = slices.DeleteFunc(pending, func(d dumpWait) bool {
			return unix.Kill(int(d.pid), 0) == unix.ESRCH || y.dumps.caughtUp(d.pid, y.dumpPath(d), w.endMono, w.seq)
		})
		if len(pending) == 0 {
			return
		}
		select {
		case <-y.stopping:
			// One grace for all the windows left, not one each.
			if y.stopBy.IsZero() {
				y.stopBy = time.Now().Add(stopGrace)
			}
			if y.stopBy.Before(deadline) {
				deadline = y.stopBy
			}
		default:
		}
		wait := time.Until(deadline)
		if wait <= 0 {
			y.early(w, pending)
			return
		}
		time.Sleep(min(wait, 250*time.Millisecond))
	}
}

// early counts w as symbolized before the dumps pending caught up, and logs
// it: a line per window, as the status counts them, whose explanation is
// given the first time a dump is named.
func (y *symbolizer) early(w *window, pending []dumpWait) {
	y.c.early.Add(1)
	var paths []string
	explain := false
	for i, d := range pending {
		if y.dumps.warnOnce(y.dumpPath(d)) {
			explain = true
		}
		if i == maxEarlyNamed {
			paths = append(paths, fmt.Sprintf("%d more", len(pending)-i))
			continue
		}
		if i < maxEarlyNamed {
			paths = append(paths, d.path)
		}
	}
	msg := fmt.Sprintf("window %d symbolized before %s caught up", w.seq, strings.Join(paths, ", "))
	if explain {
		msg += " (its runtime buffers it, as V8 does): its newest functions may stay unnamed; the status counts such windows as early"
	}
	y.o.Log(msg)
}

// maxEarlyNamed is how many dumps the line of an early window names: a host
// of buffering runtimes would make it a screenful.
const maxEarlyNamed = 5

// dumpPath is where the window reads d's dump: the watcher's copy for a
// process in a container (its dump named by its pid there), as
// jitsources finds it, or where the process saw it.
func (y *symbolizer) dumpPath(d dumpWait) string {
	if pid, _ := jitsources.MarkerPid(d.path); pid != d.pid {
		return filepath.Join(y.dir, fmt.Sprintf("jit-%d.dump", d.pid))
	}
	return d.path
}

func (y *symbolizer) warn(err error) {
	if errors.Is(err, jitdump.ErrTruncated) {
		return // a dump still being written
	}
	msg := err.Error()
	if y.warned[msg] {
		return
	}
	if len(y.warned) >= maxWarned {
		clear(y.warned)
	}
	y.warned[msg] = true
	y.o.Log(msg)
}

// sink is where profiles go. put never waits on the destination.
type sink interface {
	put(w *window, p *profile.Profile, host string)
	run()
	close()
}

// otlpSink sends profiles to an OpenTelemetry Collector over OTLP/gRPC.
type otlpSink struct {
	addr   string
	conn   *grpc.ClientConn
	client pprofileotlp.GRPCClient
	queue  chan item
	done   chan struct{}
	c      *counters
	log    func(string)
	// offCPU sends a wall-clock profile's cpu and off-cpu time, each as a
	// profile, rather than its sample counts.
	offCPU bool
}

type item struct {
	seq      int64
	profiles pprofile.Profiles
}

// Retries: exportTimeout bounds one try; the wait between tries doubles
// from retryMin to retryMax while the collector stays unreachable.
const (
	exportTimeout = 10 * time.Second
	retryMin      = 500 * time.Millisecond
	retryMax      = 15 * time.Second
	flushTimeout  = 3 * time.Second
)

func newOTLPSink(addr string, buffer int, offCPU bool, c *counters, log func(string)) (*otlpSink, error) {
	// gRPC reconnects on its own; its backoff is capped low so that a
	// collector back after an outage is found within retryMax.
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: backoff.Config{BaseDelay: retryMin, Multiplier: 1.6, Jitter: 0.2, MaxDelay: retryMax},
			MinConnectTimeout: 5 * time.Second}))
	if err != nil {
		return nil, fmt.Errorf("--otlp %s: %w", addr, err)
	}
	return &otlpSink{addr: addr, conn: conn, client: pprofileotlp.NewGRPCClient(conn),
		queue: make(chan item, buffer), done: make(chan struct{}), c: c, log: log, offCPU: offCPU}, nil
}

func (x *otlpSink) put(w *window, p *profile.Profile, host string) {
	o := otlpprof.Options{Host: host, Start: w.start, Processes: w.procs}
	if x.offCPU {
		o.SampleTypes = []string{perfprof.CPUType, perfprof.OffCPUType}
	}
	ps, err := otlpprof.Convert(p, o)
	if err != nil {
		x.log(fmt.Sprintf("window %d: %v", w.seq, err))
		return
	}
	it := item{seq: w.seq, profiles: ps}
	for {
		select {
		case x.queue <- it:
			return
		default:
		}
		select { // full: the oldest waiting window gives way
		case old := <-x.queue:
			x.drop(old, "more windows wait for the collector than --buffer holds")
		default:
		}
	}
}

func (x *otlpSink) drop(it item, why string) {
	n := x.c.dropped.Add(1)
	x.log(fmt.Sprintf("window %d dropped: %s (%d dropped in all)", it.seq, why, n))
}

func (x *otlpSink) run() {
	c, log := x.c, x.log
	defer x.conn.Close()
	failures := 0
	for {
		var it item
		select {
		case it = <-x.queue:
		case <-x.done:
			x.flush()
			return
		}
		wait := retryMin
		for {
			err := x.send(it, exportTimeout)
			if err == nil {
				c.sent.Add(1)
				if failures > 0 {
					log(fmt.Sprintf("collector %s reachable again after %d failed tries; %d windows dropped in all", x.addr, failures, c.dropped.Load()))
					failures = 0
				}
				break
			}
			c.sendErrors.Add(1)
			if failures == 0 {
				log(fmt.Sprintf("collector %s: %v; retrying, up to %d windows wait", x.addr, err, cap(x.queue)))
			}
			failures++
			select {
			case <-time.After(wait):
			case <-x.done:
				x.drop(it, "stopping with the collector unreachable")
				x.flush()
				return
			}
			wait = min(2*wait, retryMax)
		}
	}
}

func (x *otlpSink) send(it item, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	// Profiles compress several times over; the OTLP receiver takes gzip.
	_, err := x.client.Export(ctx, pprofileotlp.NewExportRequestFromProfiles(it.profiles), grpc.UseCompressor(gzip.Name))
	return err
}

// flush tries once to send what still waits, when stopping.
func (x *otlpSink) flush() {
	for {
		select {
		case it := <-x.queue:
			if err := x.send(it, flushTimeout); err != nil {
				x.c.sendErrors.Add(1)
				x.drop(it, "stopping with the collector unreachable")
				continue
			}
			x.c.sent.Add(1)
		default:
			return
		}
	}
}

func (x *otlpSink) close() { close(x.done) }

// pprofSink writes each window's profile into a directory, written whole,
// and removes the oldest to keep the directory within max bytes, or to
// make room when the disk is full.
type pprofSink struct {
	dir string
	max int64
	c   *counters
	log func(string)
}

// pprofPrefix starts the name of the files the agent writes, and only
// those are counted and removed (of them, only the agent's own: see
// profiles).
const pprofPrefix = "jitprof-"

func (ps *pprofSink) put(w *window, p *profile.Profile, _ string) {
	var data bytes.Buffer
	if err := p.Write(&data); err != nil {
		ps.log(fmt.Sprintf("window %d: %v", w.seq, err))
		return
	}
	name := filepath.Join(ps.dir, fmt.Sprintf("%s%s-%06d.pb.gz", pprofPrefix, w.start.UTC().Format("20060102T150405Z"), w.seq))
	write := func() error {
		return atomicfile.Private.Write(name, func(f io.Writer) error { _, err := f.Write(data.Bytes()); return err })
	}
	err := write()
	if diskFull(err) {
		err = ps.makeRoom(w.seq, int64(data.Len()), write)
	}
	if err != nil {
		ps.log(fmt.Sprintf("window %d: %v", w.seq, err))
		return
	}
	ps.c.pprofFiles.Add(1)
	if err := ps.trim(); err != nil {
		ps.log(fmt.Sprintf("%s: %v", ps.dir, err))
	}
}

// makeRoom removes the oldest profiles, one at a time, until write, of a
// profile of size bytes, passes on a full disk: the newest profiles are
// worth more than the oldest. None are removed when all of them would not
// make room (the disk is full of something else).
func (ps *pprofSink) makeRoom(seq, size int64, write func() error) error {
	old, err := ps.profiles()
	if err != nil {
		return err
	}
	var stat unix.Statfs_t
	if err := unix.Statfs(ps.dir, &stat); err != nil {
		return err
	}
	var ours int64
	for _, f := range old {
		ours += f.disk
	}
	if free := int64(stat.Bavail) * stat.Bsize; free+ours < size {
		return fmt.Errorf("%s: disk full: %d bytes free, and the %d profiles there hold %d: %d needed; none removed", ps.dir, free, len(old), ours, size)
	}
	var removed int
	var freed int64
	err = unix.ENOSPC
	for ; diskFull(err) && removed < len(old); removed++ {
		if err = os.Remove(filepath.Join(ps.dir, old[removed].name)); err != nil {
			break
		}
		freed += old[removed].size
		err = write()
	}
	if err != nil {
		return fmt.Errorf("%w; removed the %d oldest profiles (%d bytes), not enough", err, removed, freed)
	}
	ps.log(fmt.Sprintf("%s: disk full: removed the %d oldest profiles (%d bytes) to make room for window %d", ps.dir, removed, freed, seq))
	return nil
}

// diskFull tells whether err says the file system or the user's quota is
// full.
func diskFull(err error) bool {
	return errors.Is(err, unix.ENOSPC) || errors.Is(err, unix.EDQUOT)
}

// pprofFile is a profile in the directory: its size, and the disk it
// takes (whole blocks).
type pprofFile struct {
	name       string
	size, disk int64
}

// profiles lists the agent's profiles in the directory, oldest first. The
// directory can be shared (sticky, as /tmp), where anyone can make a file
// of such a name, one that sorts as the newest: only regular files of the
// agent's own user, not linked elsewhere, are the agent's, so that another
// user's can neither make it remove its own profiles nor be removed. A
// file counts no more than its blocks hold: a sparse one's length costs no
// disk.
func (ps *pprofSink) profiles() ([]pprofFile, error) {
	entries, err := os.ReadDir(ps.dir)
	if err != nil {
		return nil, err
	}
	euid := uint32(os.Geteuid())
	var files []pprofFile
	for _, e := range entries {
		if !e.Type().IsRegular() || !strings.HasPrefix(e.Name(), pprofPrefix) || !strings.HasSuffix(e.Name(), ".pb.gz") {
			continue
		}
		fi, err := e.Info() // lstat: a symlink planted since is no regular file
		if err != nil {
			continue
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok || !fi.Mode().IsRegular() || st.Uid != euid || st.Nlink != 1 {
			continue
		}
		disk := st.Blocks * 512
		files = append(files, pprofFile{e.Name(), min(fi.Size(), disk), disk})
	}
	slices.SortFunc(files, func(a, b pprofFile) int { return strings.Compare(a.name, b.name) }) // names sort by time
	return files, nil
}

// trim removes the oldest profiles until the rest fit max.
func (ps *pprofSink) trim() error {
	if ps.max <= 0 {
		return nil
	}
	files, err := ps.profiles()
	if err != nil {
		return err
	}
	var total int64
	for _, f := range files {
		total += f.size
	}
	for _, f := range files[:max(len(files)-1, 0)] { // the newest is always kept
		if total <= ps.max {
			break
		}
		if err := os.Remove(filepath.Join(ps.dir, f.name)); err != nil {
			return err
		}
		total -= f.size
	}
	return nil
}

func (ps *pprofSink) run()   {}
func (ps *pprofSink) close() {}

// writeStatus rewrites the status file, if there is one, with the
// counters as they are now. The sampler and the symbolizer both write it;
// the lock keeps a later write from holding older counters.
func (c *counters) writeStatus(path string) {
	if path == "" {
		return
	}
	c.statusMu.Lock()
	defer c.statusMu.Unlock()
	s := c.snapshot()
	atomicfile.Private.Write(path, func(w io.Writer) error {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(s)
	})
}
