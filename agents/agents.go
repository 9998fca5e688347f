// Package agents hands out jitprof's agents, the shared libraries that make
// runtimes write jitdump: the JVMTI agent for Java and the collector of
// Intel's JIT Profiling API (PHP's opcache, LLVM, wasmtime, ...).
//
// The libraries are C (agents/jvmti, agents/ittjit, sharing the writer in
// agents/jitdump), built by `make agents`; they run inside foreign
// processes, so they hold no Go runtime. `make build` embeds them in the
// jitprof binary (build tag embedagents); Library then extracts them on
// demand. A jitprof built with plain `go build` finds them on disk instead.
package agents

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/jitprof/jitprof/internal/atomicfile"
)

// Kind names an agent.
type Kind int

const (
	// JVMTI is the agent for Java: java -agentpath:LIB[=dir=DIR,verbose].
	JVMTI Kind = iota
	// IttJIT collects Intel JIT Profiling API events: INTEL_JIT_PROFILER64=LIB.
	IttJIT
)

var fileNames = [...]string{JVMTI: "libjitprof-jvmti.so", IttJIT: "libjitprof-ittjit.so"}

func (k Kind) String() string {
	switch k {
	case JVMTI:
		return "jvmti"
	case IttJIT:
		return "ittjit"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// FileName is the library's file name, as `make agents` builds it.
func (k Kind) FileName() string {
	if k < 0 || int(k) >= len(fileNames) {
		return ""
	}
	return fileNames[k]
}

// Library returns the path of a usable copy of the agent: the one embedded
// in this binary, extracted into the user's cache directory, else one found
// next to the executable, in ../lib/jitprof relative to it, or in the
// build/ directory of the source tree.
func Library(k Kind) (string, error) {
	name := k.FileName()
	if name == "" {
		return "", fmt.Errorf("agents: unknown agent %v", k)
	}
	var extractErr error
	if data := embedded(name); data != nil {
		cache, err := os.UserCacheDir()
		if err == nil {
			var path string
			if path, err = extract(name, data, filepath.Join(cache, "jitprof")); err == nil {
				return path, nil
			}
		}
		extractErr = err
	}
	path, err := find(name, searchDirs())
	if err != nil && extractErr != nil {
		return "", fmt.Errorf("agents: extracting the embedded %s: %w; %w", name, extractErr, err)
	}
	return path, err
}

// searchDirs lists where an unembedded agent may be, most specific first:
// $JITPROF_AGENT_DIR, for packagers and tests, comes first.
func searchDirs() []string {
	var dirs []string
	if dir := os.Getenv("JITPROF_AGENT_DIR"); dir != "" {
		dirs = append(dirs, dir)
	}
	if exe, err := os.Executable(); err == nil {
		if real, err := filepath.EvalSymlinks(exe); err == nil {
			exe = real
		}
		dir := filepath.Dir(exe)
		dirs = append(dirs, dir, filepath.Join(dir, "..", "lib", "jitprof"), filepath.Join(dir, "build"))
	}
	// The source tree this package was compiled from, for go run and go
	// test; with -trimpath the path is not absolute and is skipped.
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		dirs = append(dirs, filepath.Join(filepath.Dir(file), "..", "build"))
	}
	return dirs
}

// find returns the first dirs/name that is a regular file.
func find(name string, dirs []string) (string, error) {
	for _, dir := range dirs {
		path := filepath.Join(dir, name)
		if st, err := os.Stat(path); err == nil && st.Mode().IsRegular() {
			return filepath.Clean(path), nil
		}
	}
	return "", fmt.Errorf("agents: %s not found in %s; build it with `make agents` in jitprof's source tree, or build jitprof with `make build`, which embeds it",
		name, strings.Join(dirs, ", "))
}

// extract writes data into dir under a name holding its hash, unless a file
// with that content is already there, and returns its path. The hash in
// the name keeps binaries of different versions from sharing a copy; the
// content is compared too, so a damaged copy is replaced.
func extract(name string, data []byte, dir string) (string, error) {
	sum := sha256.Sum256(data)
	base := strings.TrimSuffix(name, ".so") + "-" + hex.EncodeToString(sum[:8]) + ".so"
	path := filepath.Join(dir, base)
	if have, err := os.ReadFile(path); err == nil && bytes.Equal(have, data) {
		return path, nil
	} else if err != nil && !errors.Is(err, os.ErrNotExist) {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	err := atomicfile.Write(path, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
	if err != nil {
		return "", err
	}
	return path, nil
}
