package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"

	"github.com/jitprof/jitprof/jitdump"
	"github.com/spf13/cobra"
)

type checkOptions struct {
	json    bool
	perKind int
}

func newCheckCmd() *cobra.Command {
	var opts checkOptions
	cmd := &cobra.Command{
		Use:   "check FILE...",
		Short: "Find spec violations in jitdump files",
		Long: `Checks jitdump files against the specification and prints each finding with
the offset of its record and a severity.

Errors: a record too small for its fields, a name without NUL, DEBUG_INFO
entries overflowing their record, a CODE_MOVE of a code index never loaded
or with another size, a code index loaded twice, reserved header flags,
corruption that stops reading.
Warnings: timestamps going backwards, DEBUG_INFO entries outside their
function's code or with a file name that is not text (node 20 writes such
for some Sparkplug functions; every jitprof command drops them, and the
summary counts them), a last record cut short, record ids the spec does not define, an unknown
header version.

Exit status: 0 when no file has errors (warnings allowed), 1 when one has,
2 when a file is not a jitdump file or cannot be read.`,
		Example: `  jitprof check /tmp/jit-*.dump
  jitprof check --json jit-4242.dump | jq -r .kind | sort | uniq -c`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			out := bufio.NewWriter(cmd.OutOrStdout())
			defer out.Flush()
			status := 0
			for _, path := range args {
				status = max(status, checkFile(out, cmd.ErrOrStderr(), path, opts))
			}
			if status != 0 {
				return &exitError{code: status}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&opts.json, "json", false, "one JSON object per finding")
	cmd.Flags().IntVar(&opts.perKind, "max", 10, "findings shown per kind and file (0: all); the rest are counted")
	return cmd
}

type jsonFinding struct {
	File     string `json:"file"`
	Offset   int64  `json:"offset"`
	Severity string `json:"severity"`
	Kind     string `json:"kind"`
	Message  string `json:"message"`
	Dropped  int    `json:"dropped,omitempty"` // DEBUG_INFO entries jitprof drops
}

// checkFile prints the findings for one file and returns its exit status.
func checkFile(out *bufio.Writer, stderr io.Writer, path string, opts checkOptions) int {
	f, err := jitdump.Open(path)
	if err != nil {
		out.Flush()
		fmt.Fprintln(stderr, "jitprof:", err)
		return 2
	}
	defer f.Close()
	findings, err := jitdump.Check(f.Reader)
	if err != nil {
		out.Flush()
		fmt.Fprintln(stderr, "jitprof:", err)
		return 2
	}

	shown := make(map[string]int)
	errs, warns, dropped := 0, 0, 0
	enc := json.NewEncoder(out)
	for _, fd := range findings {
		if fd.Severity == jitdump.Error {
			errs++
		} else {
			warns++
		}
		dropped += fd.Dropped
		if opts.json {
			enc.Encode(jsonFinding{File: path, Offset: fd.Offset, Severity: fd.Severity.String(), Kind: fd.Kind, Message: fd.Msg, Dropped: fd.Dropped})
			continue
		}
		if shown[fd.Kind]++; opts.perKind == 0 || shown[fd.Kind] <= opts.perKind {
			fmt.Fprintf(out, "%s: %s\n", path, fd)
		}
	}
	if !opts.json {
		for _, kind := range slices.Sorted(maps.Keys(shown)) {
			if n := shown[kind]; opts.perKind > 0 && n > opts.perKind {
				fmt.Fprintf(out, "%s: ... and %d more %s findings (--max 0 shows all)\n", path, n-opts.perKind, kind)
			}
		}
		fmt.Fprintf(out, "%s: %s, %s", path, plural(errs, "error"), plural(warns, "warning"))
		if dropped > 0 {
			fmt.Fprintf(out, "; DEBUG_INFO entries dropped: %d", dropped)
		}
		fmt.Fprintln(out)
	}
	if errs > 0 {
		return 1
	}
	return 0
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
