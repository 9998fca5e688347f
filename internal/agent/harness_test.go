package agent

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pprofile"
	"go.opentelemetry.io/collector/pdata/pprofile/pprofileotlp"
	"google.golang.org/grpc"
	_ "google.golang.org/grpc/encoding/gzip" // the collector's OTLP exporter compresses

	"github.com/jitprof/jitprof/internal/fixtures"
)

// The real tier runs the jitprof command and a real OpenTelemetry
// Collector, both built once per test binary into one directory.
var built struct {
	once               sync.Once
	dir                string
	jitprof, otelcol   string
	err                error
	jitprofOut, colOut string
}

func TestMain(m *testing.M) {
	code := m.Run()
	if built.dir != "" {
		os.RemoveAll(built.dir)
	}
	fixtures.RemoveAgents()
	os.Exit(code)
}

// binaries builds jitprof and the test collector (testdata/otelcol, a
// module of its own, from the Go proxy: the first build takes minutes).
func binaries(t *testing.T) (jitprof, otelcol string) {
	t.Helper()
	fixtures.RealTier(t, "building and running jitprof and an OpenTelemetry Collector")
	built.once.Do(func() {
		if built.dir, built.err = os.MkdirTemp("", "jitprof-agent-test-"); built.err != nil {
			return
		}
		built.jitprof, built.otelcol = filepath.Join(built.dir, "jitprof"), filepath.Join(built.dir, "otelcol")
		out, err := exec.Command("go", "build", "-o", built.jitprof, "../../cmd/jitprof").CombinedOutput()
		if err != nil {
			built.err, built.jitprofOut = fmt.Errorf("go build jitprof: %w", err), string(out)
			return
		}
		cmd := exec.Command("go", "build", "-o", built.otelcol, ".")
		cmd.Dir = "testdata/otelcol"
		if out, err := cmd.CombinedOutput(); err != nil {
			built.err, built.colOut = fmt.Errorf("go build testdata/otelcol: %w", err), string(out)
		}
	})
	if built.err != nil {
		t.Fatalf("%v\n%s%s", built.err, built.jitprofOut, built.colOut)
	}
	return built.jitprof, built.otelcol
}

// freePort returns a loopback port nobody listens on now.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// backend is what a profiling backend would be behind the collector: an
// OTLP/gRPC profiles server the collector forwards to, keeping everything.
type backend struct {
	pprofileotlp.UnimplementedGRPCServer
	addr string
	mu   sync.Mutex
	got  []pprofile.Profiles
}

func (b *backend) Export(_ context.Context, req pprofileotlp.ExportRequest) (pprofileotlp.ExportResponse, error) {
	p := pprofile.NewProfiles()
	req.Profiles().CopyTo(p)
	b.mu.Lock()
	b.got = append(b.got, p)
	b.mu.Unlock()
	return pprofileotlp.NewExportResponse(), nil
}

func (b *backend) received() []pprofile.Profiles {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]pprofile.Profiles(nil), b.got...)
}

func startBackend(t *testing.T) *backend {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	b := &backend{addr: l.Addr().String()}
	pprofileotlp.RegisterGRPCServer(srv, b)
	go srv.Serve(l)
	t.Cleanup(srv.Stop)
	return b
}

// collector is a running test collector: the OTLP receiver on port, the
// debug exporter (detailed) printing into out, the OTLP exporter forwarding
// to a backend.
type collector struct {
	bin, config, out string
	port             int
	cmd              *exec.Cmd
	done             chan struct{}
	logMu            sync.Mutex
	logs             strings.Builder // its standard error, every run's
}

func (c *collector) log() string {
	c.logMu.Lock()
	defer c.logMu.Unlock()
	return c.logs.String()
}

// collectorAndBackend starts a collector that forwards to a backend, and
// returns them with the jitprof command.
func collectorAndBackend(t *testing.T) (jitprof string, be *backend, col *collector) {
	t.Helper()
	jitprof, otelcol := binaries(t)
	be = startBackend(t)
	col = newCollector(t, otelcol, freePort(t), be.addr)
	col.start(t)
	return jitprof, be, col
}

// exampleConfig is the collector configuration README's agent section
// shows; the test runs it with its own addresses.
const exampleConfig = "../../examples/agent/otelcol.yaml"

func newCollector(t *testing.T, bin string, port int, forward string) *collector {
	t.Helper()
	dir := t.TempDir()
	c := &collector{bin: bin, config: filepath.Join(dir, "config.yaml"), out: filepath.Join(dir, "debug.out"), port: port}
	example, err := os.ReadFile(exampleConfig)
	if err != nil {
		t.Fatal(err)
	}
	config := string(example)
	for from, to := range map[string]string{"127.0.0.1:4317": fmt.Sprintf("127.0.0.1:%d", port), "profiles-backend.example:4317": forward} {
		if !strings.Contains(config, from) {
			t.Fatalf("%s has no %s to replace", exampleConfig, from)
		}
		config = strings.ReplaceAll(config, from, to)
	}
	if err := os.WriteFile(c.config, []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.stop)
	return c
}

// start runs the collector and waits until it listens.
func (c *collector) start(t *testing.T) {
	t.Helper()
	out, err := os.OpenFile(c.out, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	c.cmd = exec.Command(c.bin, "--config", c.config, "--feature-gates=service.profilesSupport")
	c.cmd.Stdout = out
	stderr, err := c.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c.done = make(chan struct{})
	ready := make(chan struct{})
	log := &c.logs
	go func() {
		sc := bufio.NewScanner(stderr)
		once := sync.Once{}
		for sc.Scan() {
			c.logMu.Lock()
			if log.Len() < 1<<20 {
				log.WriteString(sc.Text() + "\n")
			}
			c.logMu.Unlock()
			if strings.Contains(sc.Text(), "Everything is ready") {
				once.Do(func() { close(ready) })
			}
		}
		c.cmd.Wait()
		close(c.done)
	}()
	select {
	case <-ready:
	case <-c.done:
		t.Fatalf("the collector exited:\n%s", c.log())
	case <-time.After(60 * time.Second):
		t.Fatalf("the collector is not ready after a minute:\n%s", c.log())
	}
}

func (c *collector) stop() {
	if c.cmd == nil || c.cmd.Process == nil {
		return
	}
	c.cmd.Process.Signal(os.Interrupt)
	select {
	case <-c.done:
	case <-time.After(10 * time.Second):
		c.cmd.Process.Kill()
		<-c.done
	}
	c.cmd = nil
}

// debugOutput is what the debug exporter printed.
func (c *collector) debugOutput(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(c.out)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// readStatus reads the agent's status file.
func readStatus(t *testing.T, path string) Status {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var s Status
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return s
}

// A program a test starts is stopped this long before the test binary's
// -timeout (or a tenth of the time left, when that is less): go test's
// alarm would end the binary without running cleanups, the program's output
// lost and the program left running.
const beforeTimeout = time.Minute

// interrupted bounds how long a program takes to exit once interrupted: the
// agent sends its last windows within seconds.
const interrupted = 2 * time.Minute

// program is a workload or the agent, started by a test and stopped at its
// end. One still running at its deadline, or after interrupt, is stopped
// with SIGQUIT, and the test fails with its output: a Go program's (the
// agent's) then ends with the stack of each goroutine, where it hung.
type program struct {
	cmd  *exec.Cmd
	out  strings.Builder // read once it has exited
	stop context.CancelCauseFunc
	quit string        // why it was stopped with SIGQUIT, if it was
	done chan struct{} // closed once it has exited, err set
	err  error
}

func start(t *testing.T, dir string, argv ...string) *program {
	t.Helper()
	ctx, stop := context.WithCancelCause(context.Background())
	endDeadline := func() {}
	if deadline, ok := t.Deadline(); ok {
		before := min(beforeTimeout, time.Until(deadline)/10)
		ctx, endDeadline = context.WithDeadlineCause(ctx, deadline.Add(-before),
			fmt.Errorf("still running %v before the test binary's -timeout", before.Round(time.Second)))
	}
	p := &program{cmd: exec.CommandContext(ctx, argv[0], argv[1:]...), stop: stop, done: make(chan struct{})}
	p.cmd.Dir = dir
	p.cmd.Stdout, p.cmd.Stderr = &p.out, &p.out
	p.cmd.Cancel = func() error {
		err := p.cmd.Process.Signal(syscall.SIGQUIT)
		if err == nil {
			p.quit = context.Cause(ctx).Error()
		}
		return err
	}
	// Then it is killed: a JVM only prints its threads' stacks.
	p.cmd.WaitDelay = 10 * time.Second
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.err = p.cmd.Wait()
		if p.quit != "" {
			t.Errorf("%s: %s: stopped with SIGQUIT: %v; its output:\n%s", strings.Join(argv, " "), p.quit, p.err, p.out.String())
		}
		close(p.done)
	}()
	pid := p.cmd.Process.Pid
	t.Cleanup(func() {
		p.cmd.Process.Kill()
		<-p.done
		stop(nil)
		endDeadline()
		// Erlang writes its dump and perf map in /tmp, whatever its
		// directory.
		os.Remove(filepath.Join("/tmp", "jit-"+strconv.Itoa(pid)+".dump"))
		os.Remove(filepath.Join("/tmp", "perf-"+strconv.Itoa(pid)+".map"))
	})
	return p
}

// interrupt stops an agent as systemd or a user's ^C does, and waits for
// it to send its last windows. Tests whose programs must be sampled from
// start to exit stop the agent this way once the programs have exited,
// rather than giving it a --duration a loaded machine could outrun.
func (p *program) interrupt(t *testing.T) {
	t.Helper()
	p.cmd.Process.Signal(os.Interrupt)
	select {
	case <-p.done:
	case <-time.After(interrupted):
		p.stop(fmt.Errorf("still running %v after SIGINT", interrupted))
	}
	p.wait(t)
}

func (p *program) wait(t *testing.T) {
	t.Helper()
	<-p.done
	if p.quit != "" {
		t.FailNow() // said when it was stopped
	}
	if p.err != nil {
		t.Fatalf("%s: %v\n%s", p.cmd.Path, p.err, p.out.String())
	}
}
