package agents

import (
	"bytes"
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/jitprof/jitprof/internal/fixtures"
)

func TestMain(m *testing.M) {
	code := m.Run()
	fixtures.RemoveAgents()
	os.Exit(code)
}

// agentPath is the freshly built library of kind k.
func agentPath(t testing.TB, k Kind) string {
	return filepath.Join(fixtures.Agents(t), k.FileName())
}

// TestLibrariesExportOnlyEntryPoints: the writer's symbols are hidden, so
// two agents in one process (or a host's own symbols) cannot collide.
func TestLibrariesExportOnlyEntryPoints(t *testing.T) {
	tests := []struct {
		kind Kind
		want []string // must be exported
	}{
		{JVMTI, []string{"Agent_OnLoad", "Agent_OnAttach", "Agent_OnUnload"}},
		{IttJIT, []string{"Initialize", "NotifyEvent"}},
	}
	for _, tt := range tests {
		t.Run(tt.kind.String(), func(t *testing.T) {
			f, err := elf.Open(agentPath(t, tt.kind))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if f.Type != elf.ET_DYN {
				t.Errorf("type %v, want ET_DYN", f.Type)
			}
			syms, err := f.DynamicSymbols()
			if err != nil {
				t.Fatal(err)
			}
			exported := map[string]bool{}
			for _, s := range syms {
				if s.Section != elf.SHN_UNDEF {
					exported[s.Name] = true
				}
			}
			for _, name := range tt.want {
				if !exported[name] {
					t.Errorf("%s is not exported", name)
				}
			}
			for name := range exported {
				if strings.HasPrefix(name, "jd_") {
					t.Errorf("the writer's %s is exported", name)
				}
			}
			libs, err := f.ImportedLibraries()
			if err != nil {
				t.Fatal(err)
			}
			for _, lib := range libs {
				if !strings.HasPrefix(lib, "libc.so") && !strings.HasPrefix(lib, "libpthread.so") {
					t.Errorf("depends on %s; only libc is allowed", lib)
				}
			}
		})
	}
}

func TestKindFileName(t *testing.T) {
	tests := []struct {
		kind Kind
		want string
	}{
		{JVMTI, "libjitprof-jvmti.so"},
		{IttJIT, "libjitprof-ittjit.so"},
		{Kind(7), ""},
	}
	for _, tt := range tests {
		if got := tt.kind.FileName(); got != tt.want {
			t.Errorf("%v.FileName() = %q, want %q", tt.kind, got, tt.want)
		}
	}
	if _, err := Library(Kind(7)); err == nil {
		t.Error("Library of an unknown kind gave no error")
	}
}

func TestFind(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	lib := "libjitprof-jvmti.so"
	if err := os.WriteFile(filepath.Join(b, lib), []byte("b"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A directory by the library's name is not a library.
	if err := os.Mkdir(filepath.Join(a, lib), 0o755); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		dirs    []string
		want    string
		wantErr string
	}{
		{dirs: []string{a, b}, want: filepath.Join(b, lib)},
		{dirs: []string{b, a}, want: filepath.Join(b, lib)},
		{dirs: []string{a, filepath.Join(b, "x", "..")}, want: filepath.Join(b, lib)},
		{dirs: []string{a}, wantErr: "make agents"},
		{dirs: nil, wantErr: "not found"},
	}
	for _, tt := range tests {
		got, err := find(lib, tt.dirs)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("find in %v: error %v, want one saying %q", tt.dirs, err, tt.wantErr)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("find in %v = %q, %v; want %q", tt.dirs, got, err, tt.want)
		}
	}
}

func TestExtract(t *testing.T) {
	data, err := os.ReadFile(agentPath(t, JVMTI))
	if err != nil {
		t.Fatal(err)
	}
	cache := filepath.Join(t.TempDir(), "cache", "jitprof")
	path, err := extract("libjitprof-jvmti.so", data, []string{cache}, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Dir(path) != cache || !strings.HasPrefix(filepath.Base(path), "libjitprof-jvmti-") {
		t.Errorf("extracted to %s, want libjitprof-jvmti-<hash>.so in %s", path, cache)
	}
	check := func(what string) {
		t.Helper()
		got, err := os.ReadFile(path)
		if err != nil || !bytes.Equal(got, data) {
			t.Errorf("%s: %s does not hold the library (%v)", what, path, err)
		}
	}
	check("first extraction")

	// Extracting again reuses the file; a damaged copy is replaced.
	st, _ := os.Stat(path)
	again, err := extract("libjitprof-jvmti.so", data, []string{cache}, 0o755)
	if err != nil || again != path {
		t.Fatalf("second extraction = %s, %v; want %s", again, err, path)
	}
	if st2, _ := os.Stat(path); !os.SameFile(st, st2) {
		t.Error("an intact copy was rewritten")
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data[:100], 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := extract("libjitprof-jvmti.so", data, []string{cache}, 0o755); err != nil {
		t.Fatal(err)
	}
	check("after damage")

	// Other content, another name: two jitprof versions keep their own.
	other, err := extract("libjitprof-jvmti.so", append([]byte{}, data[:len(data)-1]...), []string{cache}, 0o755)
	if err != nil || other == path {
		t.Errorf("different content extracted to %s (%v), the same name as %s", other, err, path)
	}
	entries, _ := os.ReadDir(cache)
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".tmp") {
			t.Errorf("temporary file %s left behind", e.Name())
		}
	}

	// A cache that cannot be a directory is an error, not a panic.
	if _, err := extract("libjitprof-jvmti.so", data, []string{filepath.Join(path, "sub")}, 0o755); err == nil {
		t.Error("extracting under a regular file gave no error")
	}
}

// TestLibrary: Library finds a real agent, the embedded one extracted when
// built with -tags embedagents (as `make build` does), else the one in the
// source tree's build/ (built here first, as `make agents` would).
func TestLibrary(t *testing.T) {
	cache := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", cache)
	t.Setenv("XDG_RUNTIME_DIR", "")
	// Root's own directory, here, is not the machine's /run/jitprof.
	saved := rootExtractDirs
	rootExtractDirs = []string{filepath.Join(cache, "root")}
	t.Cleanup(func() { rootExtractDirs = saved })
	if embedded(JVMTI.FileName()) == nil {
		out, err := exec.Command("make", "-C", "..", "--no-print-directory", "agents").CombinedOutput()
		if err != nil {
			t.Fatalf("make agents: %v\n%s", err, out)
		}
	}
	for _, k := range []Kind{JVMTI, IttJIT} {
		path, err := Library(k)
		if err != nil {
			t.Fatalf("Library(%v): %v", k, err)
		}
		if data := embedded(k.FileName()); data != nil {
			got, err := os.ReadFile(path)
			if err != nil || !bytes.Equal(got, data) || !strings.HasPrefix(path, cache) {
				t.Errorf("Library(%v) = %s, not the embedded library extracted into the cache (%v)", k, path, err)
			}
		} else if want, _ := filepath.Abs(filepath.Join("..", "build", k.FileName())); path != want {
			t.Errorf("Library(%v) = %s, want %s", k, path, want)
		}
		f, err := elf.Open(path)
		if err != nil {
			t.Fatalf("Library(%v) = %s: %v", k, path, err)
		}
		f.Close()
	}
}

// A cProgram is a C test driver, compiled once per test binary beside the
// agents, warnings as errors.
type cProgram struct {
	name string
	args []string // include directories, sources, libraries
	once sync.Once
	path string
	err  error
	out  []byte
}

func (p *cProgram) build(t testing.TB) string {
	t.Helper()
	dir := fixtures.Agents(t)
	p.once.Do(func() {
		p.path = filepath.Join(dir, p.name)
		args := append([]string{"-std=gnu11", "-O2", "-Wall", "-Wextra", "-Werror", "-pthread", "-o", p.path}, p.args...)
		p.out, p.err = exec.Command("cc", args...).CombinedOutput()
	})
	if p.err != nil {
		t.Fatalf("compiling %s: %v\n%s", p.name, p.err, p.out)
	}
	return p.path
}
