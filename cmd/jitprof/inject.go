package main

import (
	"fmt"
	"os"
	"runtime/debug"
	"sync"

	"github.com/jitprof/jitprof/internal/inject"
	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"golang.org/x/term"
)

func newInjectCmd() *cobra.Command {
	opts := inject.Options{Input: "perf.data"}
	var noPack, quiet bool
	cmd := &cobra.Command{
		Use:   "inject -i perf.data -o perf.jit.data",
		Short: "Merge jitdump files into a perf.data recording (a faster perf inject --jit)",
		Long: `Reads a recording made with perf record -k mono, finds the jitdump files its
processes mapped, writes ELF images of their functions and writes OUT: the
recording with an MMAP2 event per function load and move, so that perf
report, perf script and perf annotate name and disassemble jitted code.

Images go to OUT.jit/ (--jit-dir to choose), one per dump holding all of its
functions (--no-pack: one per function, as perf writes them). Nothing is
written to ~/.debug, and IN is never changed; OUT appears whole or not at all.`,
		Example: `  perf record -k mono -g -- node --perf-prof app.js
  jitprof inject -i perf.data -o perf.jit.data
  perf report -i perf.jit.data

  # the dumps were copied from the machine that recorded
  jitprof inject -i perf.data -o perf.jit.data --jitdump-dir ./dumps`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if opts.Output == "" {
				return &exitError{code: 2, err: fmt.Errorf("inject needs -o OUT")}
			}
			opts.Pack = !noPack
			opts.Warn = func(err error) { fmt.Fprintln(cmd.ErrOrStderr(), "jitprof: warning:", err) }
			if !quiet && term.IsTerminal(int(os.Stderr.Fd())) {
				var once sync.Once
				var bar *progressbar.ProgressBar
				opts.Progress = func(done, total int64) {
					once.Do(func() {
						bar = progressbar.NewOptions64(total, progressbar.OptionSetWriter(os.Stderr),
							progressbar.OptionSetDescription("writing images"), progressbar.OptionShowCount(),
							progressbar.OptionClearOnFinish(), progressbar.OptionThrottle(100_000_000))
					})
					bar.Set64(done)
				}
			}
			// As report's analysis: the heap is mostly the dumps' index,
			// long-lived; collecting at a quarter's growth rather than
			// at double keeps the peak near twice it (issue 23).
			debug.SetGCPercent(25)
			res, err := inject.Run(opts)
			if err != nil {
				return readFailed(cmd, opts.Input, err)
			}
			if !quiet {
				fmt.Fprintf(cmd.ErrOrStderr(), "jitprof: injected %s from %s (%s) into %s; %s, %d bytes\n",
					count(res.Functions, "function"), count(res.Dumps, "dump"), count(res.Events, "event"), opts.Output, count(res.Images, "image"), res.ImageBytes)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVarP(&opts.Input, "input", "i", opts.Input, "the recording")
	f.StringVarP(&opts.Output, "output", "o", "", "the recording to write")
	f.StringVar(&opts.ImageDir, "jit-dir", "", "directory for the images (default OUT.jit)")
	f.StringArrayVar(&opts.DumpDirs, "jitdump-dir", nil, "search `DIR` for dumps not at their recorded path (repeatable)")
	f.BoolVarP(&opts.Host.Force, "force", "f", false, "read dumps whoever owns them, as perf's -f (by default one owned by neither its process's owner nor root, nor by you once the process is gone, is skipped)")
	f.BoolVar(&noPack, "no-pack", false, "one image per function, as perf inject writes them")
	f.BoolVarP(&quiet, "quiet", "q", false, "no progress bar and no summary")
	f.BoolP("jit", "j", true, "accepted for perf inject's muscle memory; injecting jitted code is what this command does")
	return cmd
}
