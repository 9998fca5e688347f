package perfdata_test

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/jitprof/jitprof/internal/fixtures"
	"github.com/jitprof/jitprof/perfdata"
)

// TestFeaturesReadBack: the feature sections a recorder writes read back
// with this package's decoders, and perf report --header shows them.
func TestFeaturesReadBack(t *testing.T) {
	attr := &perfdata.Attr{Type: 1, SamplePeriod: 999, SampleType: perfdata.SampleIP | perfdata.SampleTID,
		Flags: perfdata.AttrFreq | perfdata.AttrSampleIDAll, IDs: []uint64{7, 8}}
	ed, err := perfdata.EventDescFeature([]*perfdata.Attr{attr}, []string{"cpu-clock"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := perfdata.EventDescFeature([]*perfdata.Attr{attr}, nil); err == nil {
		t.Error("EventDescFeature took an event without a name")
	}
	clock := perfdata.ClockData{ClockID: 1, WallNs: 1_795_000_000_123_456_789, ClockNs: 86_400_000_000_042}
	path := filepath.Join(t.TempDir(), "perf.data")
	w, err := perfdata.Create(path, perfdata.Options{Attrs: []*perfdata.Attr{attr}, Features: []perfdata.Feature{
		perfdata.StringFeatureOf(perfdata.FeatureHostname, "host-with-a-name-longer-than-sixty-four-bytes-to-cross-the-padding"),
		perfdata.StringFeatureOf(perfdata.FeatureOSRelease, "6.1.0-test"),
		perfdata.StringFeatureOf(perfdata.FeatureArch, "x86_64"),
		perfdata.NrCPUsFeature(4, 2),
		perfdata.CmdlineFeature([]string{"jitprof", "record", "--", "a b"}),
		perfdata.ClockDataFeature(clock),
		ed,
	}})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := perfdata.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for id, want := range map[perfdata.FeatureID]string{
		perfdata.FeatureHostname:  "host-with-a-name-longer-than-sixty-four-bytes-to-cross-the-padding",
		perfdata.FeatureOSRelease: "6.1.0-test",
		perfdata.FeatureArch:      "x86_64",
	} {
		if got, ok, err := f.StringFeature(id); got != want || !ok || err != nil {
			t.Errorf("feature %d: %q, %v, %v; want %q", id, got, ok, err, want)
		}
	}
	if got, ok, err := f.ClockData(); got != clock || !ok || err != nil {
		t.Errorf("clock data %+v, %v, %v; want %+v", got, ok, err, clock)
	}
	descs, err := f.EventDescs()
	if err != nil || len(descs) != 1 || descs[0].Name != "cpu-clock" || !slices.Equal(descs[0].IDs, attr.IDs) {
		t.Errorf("event descriptions %+v, %v", descs, err)
	}

	header := string(fixtures.Perf(t, "report", "-i", path, "--header-only"))
	for _, want := range []string{"os release : 6.1.0-test", "nrcpus online : 2", "nrcpus avail : 4",
		"cmdline : jitprof record -- a b", "event : name = cpu-clock",
		"clockid: monotonic (1)", "= 86400.000000042 (monotonic)"} {
		if !strings.Contains(header, want) {
			t.Errorf("perf report --header-only lacks %q:\n%s", want, header)
		}
	}
}

// TestSalvage fills a small file system: the writes fail for lack of
// space, and Salvage leaves a file of every record that reached the disk
// whole, which this package and perf read to its end.
func TestSalvage(t *testing.T) {
	attr := &perfdata.Attr{Type: 1, SamplePeriod: 999, SampleType: perfdata.SampleIP | perfdata.SampleTID | perfdata.SampleTime,
		Flags: perfdata.AttrFreq | perfdata.AttrSampleIDAll, IDs: []uint64{7}}
	for _, tc := range []struct {
		name   string
		fsSize int
		fill   int // bytes taken before the file is written
		kept   bool
	}{
		{name: "cut in the data", fsSize: 64 << 10, kept: true},
		{name: "cut after several flushes", fsSize: 1 << 20, kept: true},
		{name: "no room for the attrs", fsSize: 64 << 10, fill: 64 << 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := fixtures.SmallFS(t, tc.fsSize)
			if tc.fill > 0 {
				// Fill it: the write that overflows fails, the rest stays.
				os.WriteFile(filepath.Join(dir, "filler"), make([]byte, tc.fill+4096), 0o644)
			}
			path := filepath.Join(dir, "perf.data")
			w, err := perfdata.Create(path, perfdata.Options{Attrs: []*perfdata.Attr{attr}})
			if err != nil {
				if !tc.kept && errors.Is(err, syscall.ENOSPC) {
					return // Create itself found no room
				}
				t.Fatal(err)
			}
			written := 0
			for i := 0; ; i++ {
				// Sizes vary so the cut falls inside a record.
				s := &perfdata.Sample{RecordHeader: perfdata.RecordHeader{Attr: attr}, IP: uint64(i), Pid: 1, Tid: 1,
					Time: uint64(i), Rest: make([]byte, 8*(i%7))}
				if err := w.WriteRecord(s); err != nil {
					if !errors.Is(err, syscall.ENOSPC) {
						t.Fatal(err)
					}
					break
				}
				written++
			}
			err = w.Salvage()
			if !tc.kept {
				if err == nil {
					t.Fatal("Salvage kept a file without its attrs")
				}
				if _, serr := os.Stat(path); !errors.Is(serr, os.ErrNotExist) {
					t.Errorf("the file was left: %v", serr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			f, err := perfdata.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			n := 0
			for {
				rec, err := f.Next()
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatalf("after %d records: %v", n, err)
				}
				if s, ok := rec.(*perfdata.Sample); !ok || s.IP != uint64(n) {
					t.Fatalf("record %d: %#v", n, rec)
				}
				n++
			}
			t.Logf("%d of %d records kept", n, written)
			if n == 0 || n > written {
				t.Errorf("%d records kept of %d written", n, written)
			}
			if out := fixtures.Perf(t, "script", "-i", path, "-F", "ip"); strings.Count(string(out), "\n") != n {
				t.Errorf("perf script reads %d samples, want %d", strings.Count(string(out), "\n"), n)
			}
		})
	}
}
