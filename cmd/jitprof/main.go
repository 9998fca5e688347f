// Command jitprof reads, checks and profiles the code that JIT compilers
// generate, from jitdump files, perf maps and perf.data recordings.
package main

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// exitError carries the exit status a command wants. Its message, if any,
// has already been printed unless err is set.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "jitprof",
		Short: "Profile just-in-time compiled code: jitdump files, perf maps, perf.data",
		Long: `jitprof reads what JIT runtimes (V8/node, the JVM, Erlang, PHP, LLVM, CPython)
write about the code they generate (jitdump files and perf maps) and turns
profiles of that code into symbolized reports.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       version(),
	}
	root.AddCommand(newDumpCmd(), newCheckCmd(), newInjectCmd(), newReportCmd(), newAnnotateCmd(), newRecordCmd(), newArchiveCmd(), newAgentCmd(), newManCmd())
	new(selfProfile).register(root)
	return root
}

func main() {
	err := newRootCmd().Execute()
	if err == nil {
		return
	}
	code := 2
	var ee *exitError
	if errors.As(err, &ee) {
		code = ee.code
		err = ee.err
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "jitprof:", err)
	}
	os.Exit(code)
}

// version is the module's version as the Go toolchain recorded it: a
// release's, a pseudo-version naming the commit, or "(devel)" with the commit
// when it knows one.
func version() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	v := info.Main.Version
	var commit, modified string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			commit = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				modified = ", modified"
			}
		}
	}
	if commit != "" && v == "(devel)" { // a pseudo-version names the commit already
		v += fmt.Sprintf(" (commit %.12s%s)", commit, modified)
	}
	return v + ", " + runtime.Version()
}
