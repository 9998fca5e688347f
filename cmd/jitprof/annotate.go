package main

import (
	"fmt"

	"github.com/jitprof/jitprof/internal/annotate"
	"github.com/jitprof/jitprof/internal/disasm"
	"github.com/spf13/cobra"
)

func newAnnotateCmd() *cobra.Command {
	var (
		samples sampleFlags
		intel   bool
	)
	cmd := &cobra.Command{
		Use:   "annotate SYMBOL [-i perf.data]",
		Short: "A function's instructions with their share of samples and source lines",
		Long: `Lists the instructions of the function SYMBOL (its name as jitprof report
shows it, or its raw name) with the samples that landed on each and, for
jitted code whose dump has DEBUG_INFO, the source line of each. Jitted code
is decoded from the code bytes in its dump, so no inject step and no objdump
are needed. A function the JIT compiled more than once (tiers, or after
freeing it) is shown once per place it was sampled at, the most sampled
first.`,
		Example: `  perf record -k mono -- lli-14 --jit-kind=mcjit fib.ll
  jitprof annotate fib
  jitprof annotate 'JS:*fib /app/fib.js:3' --intel`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			results, err := samples.analyze(cmd, nil)
			defer samples.close()
			if err != nil {
				return err
			}
			opts := annotate.Options{Syntax: disasm.GNU, Files: samples.opts.Files}
			if intel {
				opts.Syntax = disasm.Intel
			}
			if err := annotate.Write(cmd.OutOrStdout(), results[0].Profile, args[0], opts); err != nil {
				return &exitError{code: 1, err: fmt.Errorf("annotate %s: %w", args[0], err)}
			}
			return nil
		},
	}
	samples.register(cmd)
	cmd.Flags().BoolVar(&intel, "intel", false, "Intel syntax for x86 instead of AT&T")
	return cmd
}
