package webui

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/google/pprof/driver"
	"github.com/jitprof/jitprof/internal/foreign"
	"github.com/jitprof/jitprof/internal/objtool"
)

const (
	// sourceLimit bounds one source file shown, sourceBudget all of them
	// together: they are copied to the private directory.
	sourceLimit  = 16 << 20
	sourceBudget = 256 << 20
	// trimPath is the driver's -trim_path: it makes every absolute name
	// relative, so that the driver looks it up in its -source_path.
	trimPath = "/"
	// ownDir, in sources.dir, holds the files of names that cannot keep
	// their own, and the page that opens the browser; no name kept as it
	// is starts with it.
	ownDir = "jitprof"
)

// sources decides what the source views show. pprof's driver opens a source
// file by the name a profile gives it, and searches a relative name in its
// -source_path and in every parent of it up to /. The names are hostile:
// whoever wrote a perf map or a dump chose them ("JS:*x /root/secret:1:1"),
// and the server may run as root.
//
// So the driver never sees a name it could open outside a private
// directory (dir, mode 0700), its -source_path: -trim_path "/" makes every
// name relative, and for every name the driver may ask for, dir holds the
// file it will open first, so it never searches further. That file is
// the one of the same name under --source-dir (root), opened by
// foreign.Open inside it (no symlink or ".." leaves it) and copied, or else
// an empty file. A name the driver would resolve to another place in dir
// than its own (.., //) is shown under another.
type sources struct {
	dir   string
	root  string // absolute, or "" for no source at all
	rules foreign.Rules
	warn  func(error)

	mu    sync.Mutex
	names map[string]string // by the profile's name: the driver's
	taken map[string]bool   // the files in dir, relative to it
	left  int64             // of sourceBudget
}

// newSources makes the private directory and checks sourceDir, which may
// be empty.
func newSources(sourceDir string, warn func(error)) (*sources, error) {
	if warn == nil {
		warn = func(error) {}
	}
	s := &sources{names: map[string]string{}, taken: map[string]bool{}, left: sourceBudget, warn: warn}
	if sourceDir != "" {
		root, st, err := statSourceDir(sourceDir)
		if err != nil {
			return nil, err
		}
		s.root = root
		// Files are read as the directory's owner would read them, so
		// that a hard link there to a file its owner cannot read shows
		// nothing.
		s.rules = foreign.Rules{Root: root, As: &foreign.Cred{Uid: st.Uid, Gid: st.Gid, Groups: []uint32{st.Gid}}}
	}
	dir, err := os.MkdirTemp("", "jitprof-sources-")
	if err != nil {
		return nil, err
	}
	s.dir = dir
	if err := os.Mkdir(filepath.Join(dir, ownDir), 0o700); err != nil {
		s.close()
		return nil, err
	}
	return s, nil
}

// CheckSourceDir returns an error when dir cannot be Options.SourceDir.
func CheckSourceDir(dir string) error {
	_, _, err := statSourceDir(dir)
	return err
}

// statSourceDir returns dir made absolute and its stat.
func statSourceDir(dir string) (string, *unix.Stat_t, error) {
	root, err := filepath.Abs(dir)
	if err != nil {
		return "", nil, err
	}
	var st unix.Stat_t
	if err := unix.Stat(root, &st); err != nil {
		return "", nil, fmt.Errorf("--source-dir: %w", &fs.PathError{Op: "stat", Path: root, Err: err})
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return "", nil, fmt.Errorf("--source-dir %s: not a directory", root)
	}
	return root, &st, nil
}

// close removes the private directory.
func (s *sources) close() error { return os.RemoveAll(s.dir) }

// name returns the name the driver is given for a source file the profile
// or a dump calls name: name itself where the driver finds it in dir.
func (s *sources) name(name string) string {
	if name == "" {
		return "" // the driver opens dir itself, and reads nothing from a directory
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if n, ok := s.names[name]; ok {
		return n
	}
	n := s.place(name)
	s.names[name] = n
	return n
}

// place puts the file for name in dir and returns the name that finds it
// there.
func (s *sources) place(name string) string {
	rel := strings.TrimPrefix(name, trimPath) // what the driver joins to dir
	own := filepath.IsLocal(rel) && filepath.Clean(rel) == rel && !s.taken[rel] &&
		rel != ownDir && !strings.HasPrefix(rel, ownDir+"/")
	if own && s.create(rel, name) == nil {
		return name
	}
	// Numbered, and with the base name, so that the views still say
	// which file it was.
	n := strconv.Itoa(len(s.names))
	for _, rel := range []string{filepath.Join(ownDir, n, shortBase(name)), filepath.Join(ownDir, n)} {
		if s.create(rel, name) == nil {
			return "/" + rel
		}
	}
	// Not even an empty file could be made (the disk is full): a name the
	// driver finds nowhere, dir being private, and searches for in no
	// other place, being absolute once trimmed.
	return "/" + filepath.Join(s.dir, ownDir, "unplaced")
}

// shortBase is the last element of name, or "source" where that would not
// do as a file name.
func shortBase(name string) string {
	b := filepath.Base(name)
	if b == "." || b == ".." || b == "/" || len(b) > 200 || strings.ContainsRune(b, 0) {
		return "source"
	}
	return b
}

// create makes the file rel in dir, with the contents of the file name
// under root where it has one.
func (s *sources) create(rel, name string) error {
	path := filepath.Join(s.dir, rel)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	s.taken[rel] = true
	src, err := s.open(name)
	if err == nil && src != nil {
		var n int64
		n, err = foreign.Copy(f, src, 0, min(sourceLimit, s.left))
		s.left -= n
		src.Close()
		if err != nil {
			f.Truncate(0) // a part of a file would show lines that are not there
		}
	}
	if err != nil {
		s.warn(fmt.Errorf("the source file %s is not shown: %w", name, err))
	}
	return f.Close()
}

// open opens the file name names under root: as a path under root, or as
// a path from root (where it was built, say), or nil when it is in
// neither place.
func (s *sources) open(name string) (*os.File, error) {
	if s.root == "" {
		return nil, nil
	}
	paths := []string{name}
	if rel, err := filepath.Rel(s.root, name); err == nil && filepath.IsAbs(name) && filepath.IsLocal(rel) {
		paths = []string{rel, name}
	}
	var refused error
	for _, p := range paths {
		f, err := foreign.Open(p, s.rules)
		if err == nil {
			return f, nil
		}
		if !errors.Is(err, fs.ErrNotExist) && refused == nil {
			refused = err
		}
	}
	return nil, refused
}

// objTool is objtool's Tool with the names of source files it gives the
// driver (from dumps' line tables) made safe by sources.
type objTool struct {
	*objtool.Tool
	src *sources
}

func (t objTool) Open(file string, start, limit, offset uint64, relocationSymbol string) (driver.ObjFile, error) {
	f, err := t.Tool.Open(file, start, limit, offset, relocationSymbol)
	if err != nil {
		return nil, err
	}
	return objFile{f, t.src}, nil
}

func (t objTool) Disasm(file string, start, end uint64, intelSyntax bool) ([]driver.Inst, error) {
	insts, err := t.Tool.Disasm(file, start, end, intelSyntax)
	for i := range insts {
		insts[i].File = t.src.name(insts[i].File)
	}
	return insts, err
}

type objFile struct {
	driver.ObjFile
	src *sources
}

func (f objFile) SourceLine(addr uint64) ([]driver.Frame, error) {
	frames, err := f.ObjFile.SourceLine(addr)
	for i := range frames {
		frames[i].File = f.src.name(frames[i].File)
	}
	return frames, err
}
