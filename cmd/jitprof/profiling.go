package main

import (
	"errors"
	"os"
	"runtime/pprof"

	"github.com/spf13/cobra"
)

// selfProfile profiles jitprof itself, for its own performance work: the
// hidden --cpuprofile and --memprofile flags of every command.
type selfProfile struct {
	cpu, mem string
	cpuFile  *os.File
}

func (p *selfProfile) register(root *cobra.Command) {
	f := root.PersistentFlags()
	f.StringVar(&p.cpu, "cpuprofile", "", "write a CPU profile of jitprof to `FILE`")
	f.StringVar(&p.mem, "memprofile", "", "write a heap profile of jitprof to `FILE` at exit")
	f.MarkHidden("cpuprofile")
	f.MarkHidden("memprofile")
	root.PersistentPreRunE = func(*cobra.Command, []string) error { return p.start() }
	root.PersistentPostRunE = func(*cobra.Command, []string) error { return p.stop() }
}

func (p *selfProfile) start() error {
	if p.cpu == "" {
		return nil
	}
	f, err := os.Create(p.cpu)
	if err != nil {
		return err
	}
	p.cpuFile = f
	return pprof.StartCPUProfile(f)
}

func (p *selfProfile) stop() error {
	var errs []error
	if p.cpuFile != nil {
		pprof.StopCPUProfile()
		errs = append(errs, p.cpuFile.Close())
	}
	if p.mem != "" {
		f, err := os.Create(p.mem)
		if err != nil {
			return err
		}
		errs = append(errs, pprof.Lookup("heap").WriteTo(f, 0), f.Close())
	}
	return errors.Join(errs...)
}
