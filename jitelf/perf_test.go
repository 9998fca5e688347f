package jitelf

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/jitprof/jitprof/internal/dumpindex"
	"github.com/jitprof/jitprof/internal/fixtures"
)

// TestPerfPackedImage checks, with perf itself, that an MMAP2 event whose
// pgoff is a function's offset in a packed image maps exactly that
// function, although that pgoff is not page-aligned.
//
// It records node, lets perf inject write its one image per function and
// its MMAP2 events, and notes which symbol perf script gives each sample.
// Then every one of perf's images becomes a hard link to one packed image
// of all the dump's functions, and every MMAP2 event's pgoff (and the
// header's build-ids) is patched in place to point at the function in it.
// perf script must then give every sample the same symbol.
func TestPerfPackedImage(t *testing.T) {
	rec := fixtures.Record(t, fixtures.Node)
	injected := fixtures.Inject(t, rec)
	fields := []string{"script", "-F", "pid,ip,sym,symoff,dso", "-i"}
	before := string(fixtures.Perf(t, append(fields, injected)...))

	d, err := dumpindex.Read(rec.Dumps[0])
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	img := writeImage(t, OptionsFor(d.Header), functionsOf(d))
	packed := filepath.Join(t.TempDir(), "packed.so")
	if err := os.WriteFile(packed, img.data, 0o644); err != nil {
		t.Fatal(err)
	}
	pgoff := map[string]uint64{} // by the name of perf's image
	fnOf := map[string]int{}
	for i := range d.Functions {
		p := imagePath(rec, d, i)
		pgoff[filepath.Base(p)] = img.lay.Offsets[i]
		fnOf[filepath.Base(p)] = i
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
		if err := os.Link(packed, p); err != nil {
			t.Fatal(err)
		}
	}

	data, err := os.ReadFile(injected)
	if err != nil {
		t.Fatal(err)
	}
	mmaps, unaligned := patchPerfData(t, data, pgoff, img.lay.BuildID)
	patched := filepath.Join(filepath.Dir(injected), "perf.packed.data")
	if err := os.WriteFile(patched, data, 0o644); err != nil {
		t.Fatal(err)
	}
	after := string(fixtures.Perf(t, append(fields, patched)...))

	jitted := regexp.MustCompile(`/(jitted-\d+-\d+\.so)\)$`)
	bl, al := strings.Split(before, "\n"), strings.Split(after, "\n")
	if len(bl) != len(al) {
		t.Fatalf("perf script printed %d lines, then %d", len(bl), len(al))
	}
	samples, named, bad := 0, 0, 0
	annotated := ""
	for k := range bl {
		m := jitted.FindStringSubmatch(bl[k])
		if m == nil {
			continue
		}
		samples++
		if !strings.Contains(bl[k], "[unknown]") {
			named++
			annotated = m[1]
		}
		if bl[k] != al[k] {
			if bad++; bad <= 10 {
				t.Errorf("perf's images: %s\npacked image: %s", bl[k], al[k])
			}
		}
	}
	t.Logf("%d MMAP2 events patched, %d with a pgoff that is not page-aligned; %d samples in jitted code, %d of them named, %d differ",
		mmaps, unaligned, samples, named, bad)
	if named == 0 || unaligned == 0 {
		t.Fatalf("the recording tests nothing: %d named samples in jitted code, %d unaligned pgoffs", named, unaligned)
	}

	// perf annotate disassembles the function from the packed image, at
	// its offset there.
	out := string(fixtures.Perf(t, "annotate", "--stdio", "-i", patched, "--dsos", annotated))
	fn := d.Functions[fnOf[annotated]]
	if want := fmt.Sprintf("%016x <%s>:", pgoff[annotated], fn.Name); !strings.Contains(out, want) {
		t.Errorf("perf annotate of %s does not show %q:\n%s", annotated, want, out)
	}
}

// patchPerfData points, in place, the MMAP2 events of the perf.data in data
// that name one of perf's images at their function in the packed image, by
// pgoff, and gives those images the packed image's build-id in the header's
// build-id table. It returns how many events it patched, and how many of
// those have a pgoff that is not page-aligned.
//
// perf.data (tools/perf/Documentation/perf.data-file-format.txt): a header
// with the data section's place and a feature bitmap; records of a u32 type,
// u16 misc, u16 size; after the data, one {offset, size} per feature present.
func patchPerfData(t *testing.T, data []byte, pgoff map[string]uint64, id [BuildIDSize]byte) (mmaps, unaligned int) {
	t.Helper()
	o := binary.LittleEndian
	if string(data[:8]) != "PERFILE2" {
		t.Fatalf("not a perf.data file")
	}
	const (
		recordMmap2        = 10
		miscMmapBuildID    = 1 << 14
		featBuildID        = 2 // HEADER_BUILD_ID
		miscBuildIDSize    = 1 << 15
		mmap2Pgoff         = 32
		mmap2BuildIDSize   = 40
		mmap2BuildID       = 44
		mmap2Filename      = 72
		buildIDEventID     = 12
		buildIDEventSize   = 32
		buildIDEventName   = 36
		pageSize           = 4096
		headerDataOffset   = 40
		headerFeatures     = 72
		featureSectionSize = 16
	)
	image := func(b []byte) (uint64, bool) {
		name := string(b[:bytes.IndexByte(b, 0)])
		off, ok := pgoff[filepath.Base(name)]
		return off, ok
	}
	dataOff, dataSize := o.Uint64(data[headerDataOffset:]), o.Uint64(data[headerDataOffset+8:])
	for p := dataOff; p < dataOff+dataSize; {
		typ, misc, size := o.Uint32(data[p:]), o.Uint16(data[p+4:]), uint64(o.Uint16(data[p+6:]))
		if size == 0 {
			t.Fatalf("record of size 0 at %#x", p)
		}
		if r := data[p : p+size]; typ == recordMmap2 {
			if off, ok := image(r[mmap2Filename:]); ok {
				o.PutUint64(r[mmap2Pgoff:], off)
				if misc&miscMmapBuildID != 0 {
					r[mmap2BuildIDSize] = BuildIDSize
					copy(r[mmap2BuildID:], id[:])
				}
				mmaps++
				if off%pageSize != 0 {
					unaligned++
				}
			}
		}
		p += size
	}

	features := o.Uint64(data[headerFeatures:])
	if features&(1<<featBuildID) == 0 {
		return mmaps, unaligned
	}
	n := strconv.FormatUint(features&(1<<featBuildID-1), 2)
	sec := dataOff + dataSize + uint64(strings.Count(n, "1"))*featureSectionSize
	secOff, secSize := o.Uint64(data[sec:]), o.Uint64(data[sec+8:])
	for p := secOff; p < secOff+secSize; {
		misc, size := o.Uint16(data[p+4:]), uint64(o.Uint16(data[p+6:]))
		if size == 0 {
			t.Fatalf("build-id record of size 0 at %#x", p)
		}
		if r := data[p : p+size]; bytes.Contains(r[buildIDEventName:], []byte("/jitted-")) {
			if _, ok := image(r[buildIDEventName:]); !ok {
				t.Fatalf("build-id of an image of no CODE_LOAD: %q", r[buildIDEventName:])
			}
			copy(r[buildIDEventID:], id[:])
			if misc&miscBuildIDSize != 0 {
				r[buildIDEventSize] = BuildIDSize
			}
		}
		p += size
	}
	return mmaps, unaligned
}
