// Package inject merges the functions that JIT runtimes described in jitdump
// files into a perf.data recording, as `perf inject --jit` does: each
// function gets an ELF image and an MMAP2 event mapping it at its runtime
// address from its load (or move) on, so that perf report and perf annotate
// name and disassemble jitted code.
//
// Unlike perf, it writes one image per dump holding all of the dump's
// functions (Pack), puts images next to the output instead of in ~/.debug,
// writes them in parallel, reads dumps of any architecture, byte order and
// header size, and finds dumps that moved through a search path.
package inject

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/jitprof/jitprof/internal/atomicfile"
	"github.com/jitprof/jitprof/internal/dumpindex"
	"github.com/jitprof/jitprof/internal/jitsources"
	"github.com/jitprof/jitprof/jitelf"
	"github.com/jitprof/jitprof/perfdata"
	"golang.org/x/sys/unix"
)

// Options says what to inject where.
type Options struct {
	Input, Output string
	// ImageDir receives the ELF images; it is created if needed. Empty means
	// Output + ".jit".
	ImageDir string
	// DumpDirs are searched, in order, for a dump by its file name when it
	// is not at the path the recording saw (analysis on another machine).
	DumpDirs []string
	// Host says where the recorded processes that still run are, and how
	// far their dumps are trusted.
	Host jitsources.Host
	// Pack writes one image per dump holding all of its functions, instead
	// of one image per function as perf does.
	Pack bool
	// Progress, when set, is told how many functions have their image out
	// of how many; it is called from several goroutines.
	Progress func(done, total int64)
	// Warn receives what is skipped but does not stop the injection: a
	// dump that cannot be found or read, records of a dump that are bad.
	Warn func(error)
}

// Result tells what was injected.
type Result struct {
	Dumps      int   // dumps found and injected
	Functions  int   // CODE_LOADs turned into images
	Events     int   // MMAP2 events written for loads and moves
	Images     int   // image files written
	ImageBytes int64 // their size
}

// dumpImages is a dump and the images its functions went to: for each
// function (by its place in the dump's Functions) an image and where its
// code is in it. A packed dump's functions share one image, whose layout's
// offsets are theirs: 8 bytes a function, not twice that.
type dumpImages struct {
	dump   *jitsources.Dump
	packed bool
	images []*image // one each; one for all when packed; nil for none
	pgoffs []uint64 // nil until written
}

// place returns the image of function k and its code's offset in it; a
// nil image when it has none.
func (d *dumpImages) place(k int) (*image, uint64) {
	switch {
	case d.pgoffs == nil:
		return nil, 0
	case d.packed:
		return d.images[0], d.pgoffs[k]
	}
	return d.images[k], d.pgoffs[k]
}

type image struct {
	path     string
	buildID  []byte
	size     int64
	maj, min uint32
	ino      uint64
}

// Run injects the dumps a recording refers to.
func Run(opts Options) (Result, error) {
	var res Result
	if opts.Warn == nil {
		opts.Warn = func(error) {}
	}
	if sameFile(opts.Input, opts.Output) {
		return res, fmt.Errorf("the output %s is the input: inject never changes its input", opts.Output)
	}
	in, err := perfdata.Open(opts.Input)
	if err != nil {
		return res, err
	}
	defer in.Close()
	// A first pass finds the markers, so the dumps are read and their
	// images written (in parallel) before the copy needs them; the copy
	// reads the mapping again, at no cost.
	scan, err := perfdata.Open(opts.Input)
	if err != nil {
		return res, err
	}
	jit, err := jitsources.Scan(scan.Reader, nil)
	scan.Close()
	if err != nil {
		return res, err
	}
	if len(jit.Markers) > 0 {
		if err := jitsources.CheckClock(in.Attrs()); err != nil {
			return res, fmt.Errorf("%s: %w", opts.Input, err)
		}
	}
	dir := opts.ImageDir
	if dir == "" {
		dir = opts.Output + ".jit"
	}
	if dir, err = filepath.Abs(dir); err != nil {
		return res, err
	}
	if err := atomicfile.MkdirAll(dir, 0o700); err != nil {
		return res, err
	}

	jit.Host = opts.Host
	jit.Load(jitsources.SearchDirs(opts.Input, opts.DumpDirs), opts.Warn)
	defer jit.Close()
	dumps := make([]*dumpImages, len(jit.Dumps))
	markers := make(map[int64]marked, len(jit.Markers))
	for _, m := range jit.Markers {
		markers[m.Offset] = marked{Marker: m} // a dump not used: no images
	}
	for i, d := range jit.Dumps {
		dumps[i] = &dumpImages{dump: d, packed: opts.Pack}
		for _, m := range d.Markers {
			markers[m.Offset] = marked{m, dumps[i]}
		}
	}
	if res, err = writeImages(dumps, dir, opts); err != nil {
		return res, err
	}
	res.Dumps = len(dumps)

	out, err := perfdata.Create(opts.Output, in.Options())
	if err != nil {
		return res, err
	}
	for _, d := range dumps {
		for _, img := range d.imageSet() {
			if err := out.AddBuildID(perfdata.BuildID{Misc: perfdata.MiscUser, Pid: int32(d.dump.Header.Pid), ID: img.buildID, Filename: img.path}); err != nil {
				out.Abort()
				return res, err
			}
		}
	}
	e := emitter{in: in.Reader, out: out, jit: jit, markers: markers, injected: make(map[injectedKey]bool)}
	if err := out.Copy(in.Reader, e.keep); err != nil {
		out.Abort()
		return res, err
	}
	res.Events = e.events
	return res, out.Close()
}

// writeImages writes the images of every dump, several at a time.
func writeImages(dumps []*dumpImages, dir string, opts Options) (Result, error) {
	type job struct {
		d     *dumpImages
		first int // the place of fns[0] in the dump's Functions
		fns   []*dumpindex.Code
		path  string
		elfOp jitelf.Options
	}
	var jobs []job
	var total int64
	for _, d := range dumps {
		fns := d.dump.Functions
		total += int64(len(fns))
		pid := d.dump.Header.Pid
		op := jitelf.OptionsFor(d.dump.Header)
		if opts.Pack {
			// Not "jitted-*": perf's libdw unwinder takes such files for
			// single-function images mapped at pgoff 0.
			jobs = append(jobs, job{d, 0, fns, filepath.Join(dir, fmt.Sprintf("jitprof-%d.so", pid)), op})
			continue
		}
		d.images, d.pgoffs = make([]*image, len(fns)), make([]uint64, len(fns))
		for k, fn := range fns {
			jobs = append(jobs, job{d, k, fns[k : k+1], filepath.Join(dir, fmt.Sprintf("jitted-%d-%d.so", pid, fn.CodeIndex)), op})
		}
	}

	var (
		res      Result
		mu       sync.Mutex
		firstErr error
		done     atomic.Int64
		next     atomic.Int64
		wg       sync.WaitGroup
	)
	for range runtime.GOMAXPROCS(0) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= int64(len(jobs)) {
					return
				}
				j := jobs[i]
				// A packed image drops the dump's pages as it goes; with
				// one image per function that would be a syscall over
				// the whole dump for each, so theirs go once, after all.
				evict := j.d.dump.Evict
				if !j.d.packed {
					evict = func() {}
				}
				img, offsets, err := writeImage(j.path, j.elfOp, j.fns, evict)
				mu.Lock()
				if err != nil {
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					return
				}
				if j.d.packed {
					j.d.images, j.d.pgoffs = []*image{img}, offsets
				} else {
					j.d.images[j.first], j.d.pgoffs[j.first] = img, offsets[0]
				}
				res.Images++
				res.ImageBytes += img.size
				res.Functions += len(j.fns)
				mu.Unlock()
				if opts.Progress != nil {
					opts.Progress(done.Add(int64(len(j.fns))), total)
				}
			}
		}()
	}
	wg.Wait()
	for _, d := range dumps {
		if !d.packed {
			d.dump.Evict()
		}
	}
	return res, firstErr
}

// evictEvery is how many functions an image asks for between drops of the
// dump's pages from memory (its writer goes over them several times; at a
// million functions that is about a thousand drops, 10 ms in all).
const evictEvery = 1 << 14

// writeImage writes one image whole or not at all, and returns it with each
// function's offset in it. evict drops the pages of the dump the code is
// copied from: a packed image of a million functions touches all of the
// dump, which would otherwise stay resident beside the image (80 MB at a
// million functions).
func writeImage(path string, op jitelf.Options, fns []*dumpindex.Code, evict func()) (*image, []uint64, error) {
	defer evict()
	// The images hold the processes' code and names, as the recording
	// does: private as it is.
	f, err := atomicfile.Private.CreateTemp(path)
	if err != nil {
		return nil, nil, fmt.Errorf("image %s: %w", path, err)
	}
	// Each made when the image needs it: all of a dump's at once would
	// double the index it is made from.
	made := 0
	layout, err := jitelf.WriteFunc(f, op, len(fns), func(i int) jitelf.Function {
		if made++; made%evictEvery == 0 {
			evict()
		}
		fn := fns[i]
		ef := jitelf.Function{Name: fn.Name, Code: fn.Code(), CodeAddr: fn.CodeAddr, LineBias: fn.LineBias(), Unwind: fn.Unwind()}
		if fn.Debug() != nil {
			ef.Lines = fn.Entries() // the entries that can be right
		}
		return ef
	})
	var st unix.Stat_t
	if err == nil {
		err = unix.Fstat(int(f.Fd()), &st) // the file written, not whatever is at path
	}
	if err != nil {
		atomicfile.Discard(f, path)
		return nil, nil, fmt.Errorf("image %s: %w", path, err)
	}
	if err := atomicfile.Commit(f, path); err != nil {
		return nil, nil, fmt.Errorf("image %s: %w", path, err)
	}
	img := &image{path: path, buildID: layout.BuildID[:], size: layout.Size, maj: unix.Major(st.Dev), min: unix.Minor(st.Dev), ino: st.Ino}
	return img, layout.Offsets, nil
}

func (d *dumpImages) imageSet() []*image {
	seen := make(map[*image]bool)
	var out []*image
	for k := range d.dump.Functions {
		if img, _ := d.place(k); img != nil && !seen[img] {
			seen[img] = true
			out = append(out, img)
		}
	}
	return out
}

// marked is a marker mapping and its dump's images.
type marked struct {
	jitsources.Marker
	dump *dumpImages // nil when the dump could not be used
}

// injectedKey is a dump injected into a process.
type injectedKey struct {
	dump *dumpImages
	pid  uint32
}

// emitter rewrites the recording's records as they are copied.
type emitter struct {
	in       *perfdata.Reader
	out      *perfdata.Writer
	jit      *jitsources.Recording
	markers  map[int64]marked // by their record's offset
	injected map[injectedKey]bool
	events   int
}

// keep drops marker mappings, in their place writes an MMAP2 for every load
// and move of the marked dump (perf reads the whole dump at its marker too,
// and orders events by time), and drops the mappings the dumps replace
// (jitsources.Recording.Hides).
//
// Time, not the place in the file, decides what is dropped, because perf
// inject processes events in time order and the file is only roughly in
// it: a thread that moved to another CPU may have its later mapping in a
// ring buffer read before the marker's. Such a mapping is usually the JIT
// making its code executable, after it wrote the CODE_LOAD (LLVM's MCJIT
// does that), so keeping it would hide all the functions behind one
// anonymous region.
func (e *emitter) keep(raw perfdata.RawRecord) (bool, error) {
	t := raw.Type()
	if t != perfdata.TypeMmap && t != perfdata.TypeMmap2 {
		return true, nil
	}
	rec := e.in.Decode(raw)
	if m, ok := e.markers[raw.Offset]; ok {
		if k := (injectedKey{m.dump, m.Pid}); m.dump != nil && !e.injected[k] {
			e.injected[k] = true
			if err := e.emit(m, rec); err != nil {
				return false, err
			}
		}
		return false, nil
	}
	mi := jitsources.Mapping(rec)
	return !e.jit.Hides(mi.Pid, mi.Trailer.Time, mi.Filename), nil
}

// emit writes the MMAP2 events of a dump, each with the sample_id of the
// marker's event at the record's own time.
func (e *emitter) emit(m marked, markerRec perfdata.Record) error {
	trailer := jitsources.Mapping(markerRec).Trailer
	attr := markerRec.Header().Attr
	d := m.dump
	rec := new(perfdata.Mmap2) // encoded at once: one for all, not one per event
	for _, ev := range d.dump.Events() {
		img, pgoff := d.place(ev.Function)
		if img == nil || ev.Code.CodeSize == 0 {
			continue // nothing can be sampled in an empty function
		}
		tr := trailer
		tr.Pid, tr.Tid, tr.Time = m.Pid, ev.Tid, d.dump.PerfTime(ev.Time)
		if ev.Pid != m.Pid { // another pid namespace: the recorded pid names the thread
			tr.Tid = m.Pid
		}
		*rec = perfdata.Mmap2{
			RecordHeader: perfdata.RecordHeader{Type: perfdata.TypeMmap2, Misc: perfdata.MiscUser, Attr: attr},
			Pid:          tr.Pid, Tid: tr.Tid,
			Addr: ev.Addr, Len: ev.Code.CodeSize, Pgoff: pgoff,
			Maj: img.maj, Min: img.min, Ino: img.ino, InoGeneration: 1,
			Prot: unix.PROT_READ | unix.PROT_EXEC, Flags: unix.MAP_SHARED,
			Filename: img.path, Trailer: tr,
		}
		if err := e.out.WriteRecord(rec); err != nil {
			return err
		}
		e.events++
	}
	return nil
}

// sameFile tells whether a and b name one existing file.
func sameFile(a, b string) bool {
	sa, err := os.Stat(a)
	if err != nil {
		return false
	}
	sb, err := os.Stat(b)
	return err == nil && os.SameFile(sa, sb)
}
