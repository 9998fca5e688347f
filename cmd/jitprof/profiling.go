package main

import (
	"bytes"
	"errors"
	"io"
	"runtime/pprof"

	"github.com/spf13/cobra"

	"github.com/jitprof/jitprof/internal/atomicfile"
)

// selfProfile profiles jitprof itself, for its own performance work: the
// hidden --cpuprofile and --memprofile flags of every command.
type selfProfile struct {
	cpu, mem string
	// cpuProfile holds the CPU profile until it is written whole at the
	// end: a command that fails leaves no file, nor any temporary one.
	cpuProfile *bytes.Buffer
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
	p.cpuProfile = new(bytes.Buffer)
	return pprof.StartCPUProfile(p.cpuProfile)
}

func (p *selfProfile) stop() error {
	var errs []error
	// Shared: jitprof's profiles of itself name its own code alone.
	if p.cpuProfile != nil {
		pprof.StopCPUProfile()
		errs = append(errs, atomicfile.Shared.Write(p.cpu, func(w io.Writer) error { _, err := p.cpuProfile.WriteTo(w); return err }))
	}
	if p.mem != "" {
		errs = append(errs, atomicfile.Shared.Write(p.mem, func(w io.Writer) error { return pprof.Lookup("heap").WriteTo(w, 0) }))
	}
	return errors.Join(errs...)
}
