package main

import (
	"errors"
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
		Long: `Lists the instructions of the function SYMBOL with the samples that landed
on each and the source line of each: the line pprof -lines gives the same
address, innermost inlined function first. SYMBOL is any name jitprof report
prints (its Symbol column, "[unknown]" included), pprof's short name or the
runtime's raw one; an inferred frame's " [inferred]" may be left off. Jitted
code is decoded from the code bytes in its dump, so no inject step and no
objdump are needed. A function the JIT compiled more than once (tiers, or
after freeing it) is shown once per place it was sampled at, the most
sampled first. A function inlined into others is shown in the code of each,
the rows of its own code marked ">". Where V8's dump gives no line of the
function's script (node 20 garbles them), the line is where the function
starts, marked "(start)", as pprof shows it. Kernel code, which a recording
does not hold, is listed by sampled address. A name no sampled function
goes by is refused with the closest ones that were sampled.`,
		Example: `  perf record -k mono -- lli-14 --jit-kind=mcjit fib.ll
  jitprof annotate fib
  jitprof record -o app.data -- node app.js
  jitprof annotate 'JS:*fib /app/fib.js:3:13' -i app.data --intel
  jitprof annotate 'JS:*addMod /app.js:4:16 [inferred]' -i app.data`,
		Args: func(cmd *cobra.Command, args []string) error {
			switch {
			case len(args) == 0:
				return errors.New("annotate needs a function's name, as jitprof report prints it: jitprof annotate 'JS:*fib /app/fib.js:3:13'")
			case len(args) > 1:
				// JavaScript's names hold spaces: one unquoted
				// arrives in pieces.
				return fmt.Errorf("annotate takes one function's name, not %d: quote one with spaces, as in jitprof annotate 'JS:*fib /app/fib.js:3:13'", len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			// Only the leaf's address says which instruction a sample
			// is on: callers by function keep a profile of deep
			// distinct stacks as small as the report's.
			samples.opts.PerFunction, samples.opts.LeafAddresses = true, true
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
