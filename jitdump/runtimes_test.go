package jitdump_test

import (
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"testing"

	"github.com/jitprof/jitprof/internal/fixtures"
	"github.com/jitprof/jitprof/jitdump"
)

// TestRuntimeDumps reads the dump of every real runtime in both reading
// modes and checks it.
func TestRuntimeDumps(t *testing.T) {
	for _, rt := range fixtures.Runtimes {
		t.Run(string(rt), func(t *testing.T) {
			t.Parallel()
			path := fixtures.Dump(t, rt)

			f, err := jitdump.Open(path)
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			defer f.Close()
			mapped := rtReadAll(t, "Open", f.Reader)

			sf, err := os.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer sf.Close()
			sr, err := jitdump.NewReader(sf)
			if err != nil {
				t.Fatalf("NewReader: %v", err)
			}
			streamed := rtReadAll(t, "NewReader", sr)

			if f.Header() != sr.Header() {
				t.Errorf("headers differ:\nOpen:      %+v\nNewReader: %+v", f.Header(), sr.Header())
			}
			if want := rtDumpName.FindStringSubmatch(filepath.Base(path))[1]; strconv.Itoa(int(f.Header().Pid)) != want {
				t.Errorf("header pid %d, but the runtime's pid is %s", f.Header().Pid, want)
			}
			rtSameRecords(t, mapped, streamed)
			rtLogStats(t, path, f.Header(), mapped)

			cf, err := jitdump.Open(path)
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			defer cf.Close()
			findings, err := jitdump.Check(cf.Reader)
			if err != nil {
				t.Fatalf("Check: %v", err)
			}
			warnings := map[string]int{}
			for _, fd := range findings {
				if fd.Severity == jitdump.Error {
					t.Errorf("Check: %v", fd)
				} else {
					warnings[fd.Kind]++
				}
			}
			t.Logf("Check: %d findings, warnings by kind %v", len(findings), warnings)
		})
	}
}

// rtReadAll reads r to its end, which must be a clean io.EOF: the runtime has
// exited, so its dump is complete, and real runtimes write valid records.
func rtReadAll(t *testing.T, how string, r *jitdump.Reader) []jitdump.Record {
	t.Helper()
	var recs []jitdump.Record
	for {
		rec, err := r.Next()
		if err == io.EOF {
			return recs
		}
		if err != nil {
			t.Fatalf("%s: after %d records: %v", how, len(recs), err)
		}
		if inv, ok := rec.(*jitdump.Invalid); ok {
			t.Errorf("%s: record %d: %v", how, len(recs), inv.Err)
		}
		recs = append(recs, rec)
	}
}

// rtSameRecords checks that the in-place and the streaming reader decoded the
// same records, every field and every debug entry.
func rtSameRecords(t *testing.T, mapped, streamed []jitdump.Record) {
	t.Helper()
	if len(mapped) != len(streamed) {
		t.Errorf("Open read %d records, NewReader %d", len(mapped), len(streamed))
	}
	bad := 0
	for i := range min(len(mapped), len(streamed)) {
		a, b := mapped[i], streamed[i]
		same := reflect.DeepEqual(a, b)
		if da, ok := a.(*jitdump.DebugInfo); ok && same {
			same = slices.Equal(rtEntries(da), rtEntries(b.(*jitdump.DebugInfo)))
		}
		if !same {
			t.Errorf("record %d differs:\nOpen:      %s\nNewReader: %s", i, rtBrief(a), rtBrief(b))
			if bad++; bad == 5 {
				t.Fatalf("too many differences")
			}
		}
	}
}

func rtEntries(d *jitdump.DebugInfo) []jitdump.DebugEntry {
	return slices.Collect(d.Entries())
}

// rtBrief describes a record in one line for failure messages.
func rtBrief(rec jitdump.Record) string {
	h := rec.Header()
	s := fmt.Sprintf("%s at %#x, %d bytes, time %d", h.Type, h.Offset, h.Size, h.Timestamp)
	switch r := rec.(type) {
	case *jitdump.CodeLoad:
		s += fmt.Sprintf(": %q index %d addr %#x size %d, %d code bytes", r.Name, r.CodeIndex, r.CodeAddr, r.CodeSize, len(r.Code))
	case *jitdump.DebugInfo:
		s += fmt.Sprintf(": addr %#x, %d entries", r.CodeAddr, r.NumEntries)
	case *jitdump.UnwindingInfo:
		s += fmt.Sprintf(": eh_frame %d bytes, hdr %d bytes, mapped %d", len(r.EHFrame), len(r.EHFrameHdr), r.MappedSize)
	}
	return s
}

// rtLogStats logs what the runtime wrote, for the record of what real dumps
// look like.
func rtLogStats(t *testing.T, path string, h jitdump.Header, recs []jitdump.Record) {
	t.Helper()
	counts := map[jitdump.RecordType]int{}
	var code, maxCode uint64
	nEntries := 0
	for _, rec := range recs {
		counts[rec.Header().Type]++
		switch r := rec.(type) {
		case *jitdump.CodeLoad:
			code += r.CodeSize
			maxCode = max(maxCode, r.CodeSize)
		case *jitdump.DebugInfo:
			nEntries += int(r.NumEntries)
		}
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: %d bytes, version %d, elf_mach %d; records %v; code %d bytes (largest %d); %d debug entries",
		filepath.Base(path), st.Size(), h.Version, h.ElfMach, counts, code, maxCode, nEntries)
}

// An rtLoad is a CODE_LOAD with the DEBUG_INFO and UNWINDING_INFO perf attaches
// to it: the last of each kind since the previous CODE_LOAD.
type rtLoad struct {
	*jitdump.CodeLoad
	debug  *jitdump.DebugInfo
	unwind *jitdump.UnwindingInfo
}

// rtReadLoads reads a dump and returns its loads by code index and the number
// of CODE_LOAD records.
func rtReadLoads(t *testing.T, path string) (map[uint64]rtLoad, int) {
	t.Helper()
	sf, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer sf.Close()
	r, err := jitdump.NewReader(sf)
	if err != nil {
		t.Fatalf("NewReader: %v", err)
	}
	loads := map[uint64]rtLoad{}
	n := 0
	var next rtLoad
	for _, rec := range rtReadAll(t, path, r) {
		switch rec := rec.(type) {
		case *jitdump.DebugInfo:
			next.debug = rec
		case *jitdump.UnwindingInfo:
			next.unwind = rec
		case *jitdump.CodeLoad:
			next.CodeLoad = rec
			loads[rec.CodeIndex] = next
			next = rtLoad{}
			n++
		}
	}
	return loads, n
}

var (
	// The MMAP2 perf inject emits for a CODE_LOAD, as perf script prints it:
	// PERF_RECORD_MMAP2 pid/tid: [0xSTART(0xLEN) @ 0x80 maj:min ino gen]: prot path
	// (Erlang's tid is a truncated thread handle, printed as a negative int32.)
	rtMmapLine = regexp.MustCompile(`PERF_RECORD_MMAP2 (\d+)/(-?\d+): \[0x([0-9a-f]+)\(0x([0-9a-f]+)\) @ .*\]: \S+ \S*/jitted-(\d+)-(\d+)\.so$`)
	// A sample printed with -F ip,sym,dso, in a jitted image:
	//   ip sym (path)
	rtSampleLine = regexp.MustCompile(`^\s*[0-9a-f]+ (.*) \(\S*/jitted-(\d+)-(\d+)\.so\)$`)
	rtImageName  = regexp.MustCompile(`^jitted-(\d+)-(\d+)\.so$`)
	rtDumpName   = regexp.MustCompile(`^jit-(\d+)\.dump$`)
)

// TestRuntimePerf holds the reader against Linux perf, which parses the same
// dumps with its own code: perf inject turns every CODE_LOAD into an ELF
// image and an MMAP2 event, and those must agree with what the reader found.
func TestRuntimePerf(t *testing.T) {
	for _, rt := range fixtures.Runtimes {
		t.Run(string(rt), func(t *testing.T) {
			t.Parallel()
			rec := fixtures.Record(t, rt)
			injected := fixtures.Inject(t, rec)
			script := fixtures.Perf(t, "script", "-i", injected, "--show-mmap-events", "-F", "ip,sym,dso")

			for _, dump := range rec.Dumps {
				loads, n := rtReadLoads(t, dump)
				// perf names images after the pid in the dump's name.
				pid := rtDumpName.FindStringSubmatch(filepath.Base(dump))[1]
				withDebug := rtCheckImages(t, dump, pid, loads, n)
				rtCheckMmaps(t, script, pid, loads, n)
				rtCheckSamples(t, script, pid, loads)
				t.Logf("%s: %d CODE_LOADs, %d images with .debug_line", filepath.Base(dump), n, withDebug)
			}
		})
	}
}

// rtCheckImages compares the images perf inject wrote next to the dump with
// the loads the reader found, one image per CODE_LOAD: symbol name and size,
// code bytes, line table and unwinding tables. It returns how many images
// have a line table.
func rtCheckImages(t *testing.T, dump, pid string, loads map[uint64]rtLoad, n int) int {
	t.Helper()
	images, err := filepath.Glob(filepath.Join(filepath.Dir(dump), "jitted-"+pid+"-*.so"))
	if err != nil {
		t.Fatal(err)
	}
	if len(images) != n {
		t.Errorf("perf inject wrote %d images for %s, the reader found %d CODE_LOADs", len(images), dump, n)
	}
	withDebug, wantDebug := 0, 0
	for _, l := range loads {
		if l.debug != nil && l.debug.NumEntries > 0 {
			wantDebug++
		}
	}
	bad := 0
	for _, img := range images {
		m := rtImageName.FindStringSubmatch(filepath.Base(img))
		index, _ := strconv.ParseUint(m[2], 10, 64)
		l, ok := loads[index]
		if !ok {
			t.Errorf("%s: perf made an image for code_index %d, which no CODE_LOAD has", img, index)
			continue
		}
		hasDebug, err := rtCheckImage(img, l)
		if err != nil {
			t.Errorf("%s (code_index %d, %q): %v", filepath.Base(img), index, l.Name, err)
			if bad++; bad == 10 {
				t.Fatalf("too many differences")
			}
		}
		if hasDebug {
			withDebug++
		}
	}
	if withDebug != wantDebug {
		t.Errorf("%d of perf's images have a line table, but %d CODE_LOADs follow a DEBUG_INFO with entries", withDebug, wantDebug)
	}
	return withDebug
}

// rtCheckImage compares one of perf's images with the load it was made from
// and tells whether the image has a line table.
func rtCheckImage(path string, l rtLoad) (hasDebug bool, err error) {
	f, err := elf.Open(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	return f.Section(".debug_line") != nil, rtCompareImage(f, l)
}

func rtCompareImage(f *elf.File, l rtLoad) error {
	text := f.Section(".text")
	if text == nil {
		return errors.New("no .text")
	}
	code, err := text.Data()
	if err != nil {
		return err
	}
	if !bytes.Equal(code, l.Code) {
		return fmt.Errorf(".text holds %d bytes that differ from the %d code bytes the reader found", len(code), len(l.Code))
	}

	syms, err := f.Symbols()
	if err != nil {
		return err
	}
	var funcs []elf.Symbol
	for _, s := range syms {
		if elf.ST_TYPE(s.Info) == elf.STT_FUNC {
			funcs = append(funcs, s)
		}
	}
	if len(funcs) != 1 {
		return fmt.Errorf("%d function symbols, want 1", len(funcs))
	}
	if s := funcs[0]; s.Name != l.Name || s.Size != l.CodeSize || s.Value != text.Addr {
		return fmt.Errorf("symbol %q size %d at %#x; the reader found %q size %d (text at %#x)", s.Name, s.Size, s.Value, l.Name, l.CodeSize, text.Addr)
	}

	if err := rtCheckUnwinding(f, l.unwind); err != nil {
		return err
	}

	if f.Section(".debug_line") == nil {
		return nil
	}
	if l.debug == nil {
		return errors.New("perf wrote a line table, but the reader found no DEBUG_INFO before the CODE_LOAD")
	}
	return rtCheckLines(f, text.Addr, l)
}

// rtCheckUnwinding checks that perf split the unwinding data where the reader
// did: .eh_frame first, then .eh_frame_hdr.
func rtCheckUnwinding(f *elf.File, u *jitdump.UnwindingInfo) error {
	frame, hdr := f.Section(".eh_frame"), f.Section(".eh_frame_hdr")
	if u == nil {
		if frame != nil || hdr != nil {
			return errors.New("perf wrote unwinding tables, but the reader found no UNWINDING_INFO before the CODE_LOAD")
		}
		return nil
	}
	for _, s := range []struct {
		sec  *elf.Section
		name string
		want []byte
	}{{frame, ".eh_frame", u.EHFrame}, {hdr, ".eh_frame_hdr", u.EHFrameHdr}} {
		if s.sec == nil {
			return fmt.Errorf("no %s, the reader found %d bytes of it", s.name, len(s.want))
		}
		got, err := s.sec.Data()
		if err != nil {
			return err
		}
		if !bytes.Equal(got, s.want) {
			return fmt.Errorf("%s holds %d bytes that differ from the reader's %d", s.name, len(got), len(s.want))
		}
	}
	return nil
}

// rtCheckLines compares perf's line table with the reader's DEBUG_INFO
// entries. perf writes one row per entry, at the entry's offset in the code,
// except for an entry repeating the previous one's file, line and address,
// which it leaves out.
func rtCheckLines(f *elf.File, textAddr uint64, l rtLoad) error {
	var want []jitdump.DebugEntry
	for e := range l.debug.Entries() {
		if n := len(want); n > 0 && want[n-1].Addr == e.Addr && want[n-1].Line == e.Line && want[n-1].File == e.File {
			continue
		}
		want = append(want, e)
	}
	sec, err := f.Section(".debug_line").Data()
	if err != nil {
		return err
	}
	rows, err := rtLineRows(sec)
	if err != nil {
		return fmt.Errorf(".debug_line: %v", err)
	}
	if len(rows) != len(want) {
		return fmt.Errorf("perf's line table has %d rows, the reader's DEBUG_INFO %d distinct entries (%d in all)", len(rows), len(want), l.debug.NumEntries)
	}
	for i, row := range rows {
		e := want[i]
		addr := e.Addr - l.CodeAddr + textAddr // wraps for entries before the code, as perf's do
		if row.addr != addr || row.line != e.Line || row.file != e.File {
			return fmt.Errorf("line row %d: perf %q:%d at %#x; the reader %q:%d at %#x (entry address %#x)", i, row.file, row.line, row.addr, e.File, e.Line, addr, e.Addr)
		}
	}
	return nil
}

type rtLineRow struct {
	addr uint64
	line uint32
	file string
}

// rtLineRows decodes a DWARF 2 line program as perf writes it: one unit,
// files added by DW_LNE_define_file. debug/dwarf would do, but it takes the
// empty file name Erlang gives its last entry for the end of the file list
// and rejects the table. Rows ending a sequence are left out.
func rtLineRows(b []byte) ([]rtLineRow, error) {
	bad := errors.New("truncated or malformed")
	p := 0
	u8 := func() byte {
		if p >= len(b) {
			panic(bad)
		}
		p++
		return b[p-1]
	}
	uleb := func() (v uint64) {
		for shift := 0; ; shift += 7 {
			c := u8()
			v |= uint64(c&0x7f) << shift
			if c < 0x80 {
				return v
			}
		}
	}
	sleb := func() int64 {
		var v int64
		shift := 0
		for {
			c := u8()
			v |= int64(c&0x7f) << shift
			shift += 7
			if c < 0x80 {
				if shift < 64 && c&0x40 != 0 {
					v |= -1 << shift
				}
				return v
			}
		}
	}
	str := func() string {
		n := bytes.IndexByte(b[p:], 0)
		if n < 0 {
			panic(bad)
		}
		p += n + 1
		return string(b[p-n-1 : p-1])
	}
	u := func(n int) uint64 {
		if p+n > len(b) {
			panic(bad)
		}
		var v uint64
		for i := n - 1; i >= 0; i-- {
			v = v<<8 | uint64(b[p+i])
		}
		p += n
		return v
	}

	var rows []rtLineRow
	err := func() (err error) {
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("at offset %#x: %v", p, r)
			}
		}()
		end := int(u(4)) + 4
		if version := u(2); version != 2 {
			return fmt.Errorf("version %d, perf writes 2", version)
		}
		program := int(u(4)) + p
		minInst, _, lineBase, lineRange, opBase := uint64(u8()), u8(), int8(u8()), u8(), u8()
		lengths := b[p : p+int(opBase)-1]
		p += int(opBase) - 1
		for str() != "" { // include directories
		}
		files := []string{""} // file numbers count from 1
		for name := str(); name != ""; name = str() {
			files = append(files, name)
			uleb() // directory, time, size
			uleb()
			uleb()
		}
		p = program
		addr, line, file := uint64(0), int64(1), uint64(1)
		row := func() error {
			if file >= uint64(len(files)) {
				return fmt.Errorf("row at %#x names file %d of %d", addr, file, len(files)-1)
			}
			rows = append(rows, rtLineRow{addr, uint32(line), files[file]})
			return nil
		}
		for p < end {
			switch op := u8(); {
			case op >= opBase:
				adj := op - opBase
				addr += uint64(adj/lineRange) * minInst
				line += int64(lineBase) + int64(adj%lineRange)
				if err := row(); err != nil {
					return err
				}
			case op == 0: // extended
				n := int(uleb())
				next := p + n
				switch u8() {
				case 1: // end_sequence
					addr, line, file = 0, 1, 1
				case 2: // set_address
					addr = u(n - 1)
				case 3: // define_file
					files = append(files, str()) // and operands, skipped by next
				}
				p = next
			case op == 1: // copy
				if err := row(); err != nil {
					return err
				}
			case op == 2: // advance_pc
				addr += uleb() * minInst
			case op == 3: // advance_line
				line += sleb()
			case op == 4: // set_file
				file = uleb()
			case op == 8: // const_add_pc
				addr += uint64((255-opBase)/lineRange) * minInst
			case op == 9: // fixed_advance_pc
				addr += u(2)
			default: // operands we do not need
				for range lengths[op-1] {
					uleb()
				}
			}
		}
		return nil
	}()
	return rows, err
}

// rtCheckMmaps checks the MMAP2 events perf inject made for the dump's loads:
// one per CODE_LOAD, for the reader's pid and tid, at its code address, as
// long as rtMappedSize.
func rtCheckMmaps(t *testing.T, script []byte, pid string, loads map[uint64]rtLoad, n int) {
	t.Helper()
	seen, bad := 0, 0
	for _, line := range bytes.Split(script, []byte("\n")) {
		m := rtMmapLine.FindSubmatch(line)
		if m == nil || string(m[5]) != pid {
			continue
		}
		seen++
		mpid, _ := strconv.ParseUint(string(m[1]), 10, 32)
		mtid, _ := strconv.ParseInt(string(m[2]), 10, 32)
		start, _ := strconv.ParseUint(string(m[3]), 16, 64)
		size, _ := strconv.ParseUint(string(m[4]), 16, 64)
		index, _ := strconv.ParseUint(string(m[6]), 10, 64)
		l, ok := loads[index]
		if !ok {
			t.Errorf("perf maps code_index %d, which no CODE_LOAD has: %s", index, line)
		} else if want := rtMappedSize(l); start != l.CodeAddr || size != want || uint32(mpid) != l.Pid || uint32(mtid) != l.Tid {
			t.Errorf("perf maps code_index %d at %#x, %d bytes, for %d/%d; the reader found %q at %#x, %d bytes (code %d), for %d/%d",
				index, start, size, mpid, uint32(mtid), l.Name, l.CodeAddr, want, l.CodeSize, l.Pid, l.Tid)
		} else {
			continue
		}
		if bad++; bad == 10 {
			t.Fatalf("too many differences")
		}
	}
	if seen != n {
		t.Errorf("perf inject made %d MMAP2 events for jitted code, the reader found %d CODE_LOADs", seen, n)
	}
}

// rtMappedSize is the length of perf's mapping of a load: the code, and when
// UNWINDING_INFO gives a mapped_size, the unwinding tables the runtime placed
// after the code, 8-aligned.
func rtMappedSize(l rtLoad) uint64 {
	if l.unwind == nil || l.unwind.MappedSize == 0 {
		return l.CodeSize
	}
	return (l.CodeSize+7)&^7 + l.unwind.MappedSize
}

// rtCheckSamples checks that perf attributed samples to jitted code and named
// them as the reader names the CODE_LOAD of that image.
func rtCheckSamples(t *testing.T, script []byte, pid string, loads map[uint64]rtLoad) {
	t.Helper()
	hits, bad := map[string]int{}, 0
	for _, line := range bytes.Split(script, []byte("\n")) {
		m := rtSampleLine.FindSubmatch(line)
		if m == nil || string(m[2]) != pid {
			continue
		}
		index, _ := strconv.ParseUint(string(m[3]), 10, 64)
		sym := string(m[1])
		if l, ok := loads[index]; !ok {
			t.Errorf("perf puts a sample, %q, in code_index %d, which no CODE_LOAD has", sym, index)
		} else if sym != l.Name {
			t.Errorf("perf names a sample in code_index %d %q; the reader's name is %q", index, sym, l.Name)
		} else {
			hits[sym]++
			continue
		}
		if bad++; bad == 10 {
			t.Fatalf("too many differences")
		}
	}
	if len(hits) == 0 {
		t.Errorf("perf attributed no sample to jitted code of pid %s", pid)
		return
	}
	top := slices.SortedFunc(maps.Keys(hits), func(a, b string) int { return hits[b] - hits[a] })
	t.Logf("samples in %d jitted functions; most: %q (%d)", len(hits), top[:min(3, len(top))], hits[top[0]])
}
