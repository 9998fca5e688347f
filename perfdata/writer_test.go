package perfdata_test

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jitprof/jitprof/perfdata"
)

// TestCopyEdit does what jitprof inject does to a real recording: copies
// it, dropping records (the kernel samples) and inserting an MMAP2 for
// jitted code, with the sample_id trailer of the first attr, just before
// the first sample in that code, and adds the code's build-id. perf must
// then see the records as written and attribute the sample to the new
// mapping.
func TestCopyEdit(t *testing.T) {
	path := record(t, recordings[0], 10000, "20")
	f, err := perfdata.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()

	// The first user sample outside every file mapping is in jitted code:
	// V8 runs without --perf-prof, so perf knows at most the anonymous
	// mapping that holds it.
	var target *perfdata.Sample
	var maps []*perfdata.Mmap2
	var mmap2s, userSamples int
	for {
		rec, err := f.Next()
		if err != nil {
			break
		}
		switch r := rec.(type) {
		case *perfdata.Mmap2:
			mmap2s++
			if !strings.HasPrefix(r.Filename, "//anon") {
				maps = append(maps, r)
			}
		case *perfdata.Sample:
			if r.Misc&perfdata.MiscCPUModeMask != perfdata.MiscUser {
				continue
			}
			userSamples++
			mapped := false
			for _, m := range maps {
				mapped = mapped || m.Pid == r.Pid && r.IP >= m.Addr && r.IP < m.Addr+m.Len
			}
			if target == nil && !mapped {
				target = r
			}
		}
	}
	if target == nil {
		t.Fatal("no sample in jitted code")
	}

	jitted := filepath.Join(t.TempDir(), fmt.Sprintf("jitted-%d-1.so", target.Pid))
	attr := f.Attrs()[0]
	mmap := &perfdata.Mmap2{RecordHeader: perfdata.RecordHeader{Type: perfdata.TypeMmap2, Misc: perfdata.MiscUser, Attr: attr},
		Pid: target.Pid, Tid: target.Tid, Addr: target.IP &^ 0xfff, Len: 0x1000, Pgoff: 0, Prot: 5, Flags: 2, Filename: jitted,
		Trailer: perfdata.Trailer{Pid: target.Pid, Tid: target.Tid, Time: target.Time - 1}}
	buildID := perfdata.BuildID{Misc: perfdata.MiscUser, Pid: int32(target.Pid), ID: bytes.Repeat([]byte{0x5a}, 20), Filename: jitted}

	out := filepath.Join(t.TempDir(), "edited.data")
	in, err := perfdata.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	w, err := perfdata.Create(out, in.Options())
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	err = w.Copy(in.Reader, func(rec perfdata.RawRecord) (bool, error) {
		if rec.Type() != perfdata.TypeSample {
			return true, nil
		}
		if rec.Offset == target.Offset {
			if err := w.WriteRecord(mmap); err != nil {
				return false, err
			}
		}
		return rec.Misc()&perfdata.MiscCPUModeMask != perfdata.MiscKernel, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.AddBuildID(buildID); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}

	counts := map[perfdata.RecordType]int{}
	for _, d := range perfDump(t, out, false) {
		counts[d.typ]++
	}
	if counts[perfdata.TypeSample] != userSamples || counts[perfdata.TypeMmap2] != mmap2s+1 {
		t.Errorf("perf counts %d samples and %d MMAP2, want %d and %d", counts[perfdata.TypeSample], counts[perfdata.TypeMmap2], userSamples, mmap2s+1)
	}

	r, err := perfdata.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	found := false
	for {
		rec, err := r.Next()
		if err != nil {
			break
		}
		if m, ok := rec.(*perfdata.Mmap2); ok && m.Filename == jitted {
			found = true
			if m.Attr != r.Attrs()[0] || show(m) != show(mmap) {
				t.Errorf("inserted MMAP2 reads back as\n%s, want\n%s", show(m), show(mmap))
			}
		}
	}
	if !found {
		t.Error("inserted MMAP2 not read back")
	}

	script := perfOutput(t, "script", "-i", out, "-F", "tid,time,ip,dso", "--show-mmap-events")
	wantMmap := fmt.Sprintf("PERF_RECORD_MMAP2 %d/%d: [%#x(0x1000) @ 0 00:00 0 0]: r-xp %s", target.Pid, target.Tid, mmap.Addr, jitted)
	if !strings.Contains(script, wantMmap) {
		t.Errorf("perf script does not show %q", wantMmap)
	}
	wantSample := fmt.Sprintf("%x (%s)", target.IP, jitted)
	if !strings.Contains(script, wantSample) {
		t.Errorf("perf script does not attribute the sample at %#x to the inserted mapping (%q)", target.IP, wantSample)
	}
	bids := perfOutput(t, "buildid-list", "-i", out)
	if want := hex.EncodeToString(buildID.ID) + " " + jitted; !strings.Contains(bids, want) {
		t.Errorf("perf buildid-list does not list %q:\n%s", want, bids)
	}
}

// TestWriterAtomic checks that a file appears only on Close, replacing the
// one there, and that Abort and failures leave nothing behind.
func TestWriterAtomic(t *testing.T) {
	dir := t.TempDir()
	name := filepath.Join(dir, "perf.data")
	if err := os.WriteFile(name, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	attrs := synthAttrs(perfdata.SampleIP|perfdata.SampleTID|perfdata.SampleTime|perfdata.SampleID, 0, true)
	w, err := perfdata.Create(name, perfdata.Options{Attrs: attrs})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.WriteRecord(&perfdata.FinishedRound{}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(name); string(b) != "old" {
		t.Errorf("the file changed before Close: %q", b)
	}
	if err := w.WriteRaw([]byte{1, 2, 3}); err == nil {
		t.Error("WriteRaw took 3 bytes as a record")
	}
	if err := w.WriteRecord(&perfdata.Sample{}); err == nil {
		t.Error("WriteRecord encoded a sample without its attr")
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := perfdata.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if recs, err := readAll(r.Reader); err != nil || len(recs) != 1 || len(r.Attrs()) != 2 {
		t.Errorf("read back %d records, %d attrs (%v)", len(recs), len(r.Attrs()), err)
	}
	if err := w.WriteRecord(&perfdata.FinishedRound{}); err == nil {
		t.Error("wrote after Close")
	}

	w, err = perfdata.Create(filepath.Join(dir, "aborted.data"), perfdata.Options{Pipe: true})
	if err != nil {
		t.Fatal(err)
	}
	w.Abort()
	if _, err := perfdata.Create(name, perfdata.Options{Pipe: true, Attrs: attrs}); err == nil {
		t.Error("Create took attrs for a pipe-mode file")
	}
	if _, err := perfdata.Create(name, perfdata.Options{Features: []perfdata.Feature{{ID: 3}, {ID: 3}}}); err == nil {
		t.Error("Create took a feature twice")
	}
	if _, err := perfdata.Create(filepath.Join(dir, "missing", "perf.data"), perfdata.Options{}); err == nil {
		t.Error("Create made a file in a missing directory")
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("files left behind: %q", names)
	}
}
