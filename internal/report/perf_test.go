package report

import (
	"bufio"
	"bytes"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/pprof/profile"
	"github.com/jitprof/jitprof/internal/contract"
)

// TestPerf checks the samples per command and module against perf report
// on a recording of a shell loop, through a profile made from perf script.
func TestPerf(t *testing.T) {
	if testing.Short() {
		t.Skip("runs perf")
	}
	perf, err := exec.LookPath("perf")
	if err != nil {
		t.Skip(err)
	}
	data := filepath.Join(t.TempDir(), "perf.data")
	out, err := exec.Command(perf, "record", "-q", "-F", "999", "-g", "-o", data, "--",
		"sh", "-c", "for i in $(seq 1 200000); do :; done").CombinedOutput()
	if err != nil {
		t.Skipf("perf record: %v\n%s", err, out)
	}
	script, err := exec.Command(perf, "script", "-i", data, "-F", "comm,pid,tid,period,ip,sym,dso").Output()
	if err != nil {
		t.Fatalf("perf script: %v", err)
	}
	report, err := exec.Command(perf, "report", "-i", data, "--stdio", "--no-children",
		"--sort", "comm,dso", "-n", "-g", "none").Output()
	if err != nil {
		t.Fatalf("perf report: %v", err)
	}

	want := make(map[string]int64)
	line := regexp.MustCompile(`^\s+[\d.]+%\s+(\d+)\s+(\S+)\s+(\S+)\s*$`)
	for l := range strings.Lines(string(report)) {
		if m := line.FindStringSubmatch(l); m != nil {
			n, _ := strconv.ParseInt(m[1], 10, 64)
			want[m[2]+" "+m[3]] = n
		}
	}
	if len(want) == 0 {
		t.Fatalf("no entries in perf report:\n%s", report)
	}

	p := parseScript(t, script)
	var b bytes.Buffer
	if err := JSON(&b, contract.FromPProf(p), Options{Sort: []string{"comm", "dso"}}); err != nil {
		t.Fatal(err)
	}
	got := make(map[string]int64)
	for _, e := range decodeJSON(t, b.Bytes()).Entries {
		got[e.Comm+" "+e.Module] = e.Samples
	}
	for k, n := range want {
		if got[k] != n {
			t.Errorf("%s: %d samples, perf report has %d", k, got[k], n)
		}
	}
	for k, n := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("%s: %d samples, not in perf report", k, n)
		}
	}
}

// parseScript makes a profile of the output of perf script -F
// comm,pid,tid,period,ip,sym,dso.
func parseScript(t *testing.T, script []byte) *profile.Profile {
	b := newProfBuilder()
	frame := regexp.MustCompile(`^\s+[0-9a-f]+ (.*) \((.*)\)$`)
	var comm string
	var pid, period int64
	var frames []string
	flush := func() {
		if frames != nil {
			slices.Reverse(frames)
			b.add(comm, pid, 1, period, frames...)
			frames = nil
		}
	}
	s := bufio.NewScanner(bytes.NewReader(script))
	for s.Scan() {
		l := s.Text()
		switch {
		case l == "":
			flush()
		case !strings.HasPrefix(l, "\t"):
			// comm pid/tid period, where comm may have spaces.
			f := strings.Fields(l)
			if len(f) < 3 {
				t.Fatalf("perf script: bad line %q", l)
			}
			comm = strings.Join(f[:len(f)-2], " ")
			pid, _ = strconv.ParseInt(strings.Split(f[len(f)-2], "/")[0], 10, 64)
			period, _ = strconv.ParseInt(f[len(f)-1], 10, 64)
		default:
			m := frame.FindStringSubmatch(l)
			if m == nil {
				t.Fatalf("perf script: bad frame %q", l)
			}
			sym := m[1]
			if sym == unknown {
				sym = "?"
			}
			frames = append(frames, m[2]+":"+sym)
		}
	}
	flush()
	return b.p
}
