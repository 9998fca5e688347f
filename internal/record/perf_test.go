package record

import (
	"errors"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/jitprof/jitprof/perfdata"
)

func TestOpenError(t *testing.T) {
	a := &perfdata.Attr{Type: unix.PERF_TYPE_HARDWARE}
	for _, tc := range []struct {
		err  error
		pid  int
		want []string
		is   error
	}{
		{unix.EACCES, 42, []string{"kernel.perf_event_paranoid is", "sysctl kernel.perf_event_paranoid=1", "CAP_PERFMON"}, unix.EACCES},
		{unix.EPERM, -1, []string{"kernel.perf_event_paranoid is", "-a, 0"}, unix.EPERM},
		{unix.ESRCH, 42, []string{"thread 42 on CPU 1", "exited"}, ErrGone},
		{unix.ENOENT, 42, []string{"this machine does not count", "-e cpu-clock"}, unix.ENOENT},
		{unix.EMFILE, -1, []string{"every process on CPU 1", "ulimit -n"}, unix.EMFILE},
		{unix.EINVAL, 42, []string{"perf_event_open for thread 42"}, unix.EINVAL},
	} {
		err := openError(a, tc.pid, 1, tc.err)
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%v: %q does not say %q", tc.err, err, w)
			}
		}
		if !errors.Is(err, tc.is) {
			t.Errorf("%v: %q does not match %v", tc.err, err, tc.is)
		}
	}
}

func TestParseEvent(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Event
		err  string
	}{
		{in: "cycles", want: Event{Name: "cycles", Type: unix.PERF_TYPE_HARDWARE, Config: unix.PERF_COUNT_HW_CPU_CYCLES}},
		{in: "cpu-clock:u", want: Event{Name: "cpu-clock:u", Type: unix.PERF_TYPE_SOFTWARE, Config: unix.PERF_COUNT_SW_CPU_CLOCK, ExcludeKernel: true}},
		{in: "cpu-clock:k", err: "only u"},
		{in: "cycle", err: "not one of"},
	} {
		got, err := ParseEvent(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: %v, want an error saying %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%q: %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
	}
}
