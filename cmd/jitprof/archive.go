package main

import (
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/jitprof/jitprof/internal/archive"
	"github.com/spf13/cobra"
)

func newArchiveCmd() *cobra.Command {
	var (
		samples sampleFlags
		output  string
	)
	cmd := &cobra.Command{
		Use:   "archive [-i perf.data] [-o FILE]",
		Short: "Pack a recording with its dumps, perf maps and the files its samples hit, to report it elsewhere",
		Long: `Writes one file (a gzip-compressed tar) that jitprof report, annotate and
the web UI read on another machine as they read the recording here: the
perf.data, the jitdump files and perf maps of its processes, copies of the
ELF files its samples hit, and, when it was made on the running kernel, the
kernel's symbols and vDSO.`,
		Example: `  jitprof record -g -- node app.js && jitprof archive -o app.tar.gz
  jitprof report -i app.tar.gz        # on any machine`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if output == "" {
				output = samples.opts.Input + ".tar.gz"
			}
			samples.setWarn(cmd)
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			names, err := archive.Write(ctx, output, samples.opts.Input, samples.opts.Options)
			if ctx.Err() != nil {
				return &exitError{code: 1, err: fmt.Errorf("interrupted: %s not written", output)}
			}
			if err != nil {
				return readFailed(cmd, samples.opts.Input, err)
			}
			if !samples.quiet {
				fmt.Fprintf(cmd.ErrOrStderr(), "jitprof: wrote %s: %s\n", output, strings.Join(names, ", "))
			}
			return nil
		},
	}
	samples.register(cmd)
	cmd.Flags().StringVarP(&output, "output", "o", "", "write to `FILE` (default: the recording's name + .tar.gz)")
	return cmd
}
