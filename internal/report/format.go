package report

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/jitprof/jitprof/internal/atomicfile"
	"github.com/jitprof/jitprof/internal/contract"
)

// Format is a kind of output.
type Format string

const (
	FormatText   Format = "text"   // perf report's table (Text)
	FormatJSON   Format = "json"   // the same, for scripts (JSON)
	FormatPProf  Format = "pprof"  // profile.proto, for go tool pprof
	FormatFolded Format = "folded" // one line per stack (Folded)
	FormatHTML   Format = "html"   // a page with an interactive flame graph (HTML)
	// FormatGmon and FormatKaffeAs write files for GNU gprof into a
	// directory: gmon.out and an ELF symbol file, or Kaffe's xgmon.out and
	// assembler symbol file.
	FormatGmon    Format = "gmon"
	FormatKaffeAs Format = "kaffe-as"
)

var formats = []Format{FormatText, FormatJSON, FormatPProf, FormatFolded, FormatHTML, FormatGmon, FormatKaffeAs}

// ParseFormat returns the format named s.
func ParseFormat(s string) (Format, error) {
	for _, f := range formats {
		if string(f) == s {
			return f, nil
		}
	}
	return "", fmt.Errorf("--format %q: want text, json, pprof, folded, html, gmon or kaffe-as", s)
}

// ByAddress tells whether the format needs a profile with a location per
// sampled address (perfprof.Options.PerFunction off): pprof keeps them,
// gprof's files place samples within functions. Text, JSON, folded
// stacks and HTML's flame graph name functions, never addresses.
func (f Format) ByAddress() bool {
	return f != FormatText && f != FormatJSON && f != FormatFolded && f != FormatHTML
}

// Directory tells whether the format writes several files into a
// directory rather than one stream.
func (f Format) Directory() bool { return f == FormatGmon || f == FormatKaffeAs }

// CheckOutput tells whether the format can be written to out ("" for
// standard output), so that a command can say so before reading a profile.
func (f Format) CheckOutput(out string) error {
	switch {
	case out != "":
		return nil
	case f.Directory():
		return fmt.Errorf("--format %s writes several files: give -o DIR", f)
	case f == FormatPProf:
		return fmt.Errorf("--format pprof writes a binary file: give -o FILE")
	}
	return nil
}

// Write writes the profiles of a run in format f: one profile (names
// [""]), or one per stage, named. A stream format goes to the file out,
// whole or not at all, or to stdout when out is empty; several stages are
// written as one: text in a section per stage, JSON as an array of
// {"stage", "report"}, folded stacks under a root frame "[stage NAME]",
// HTML as one page that offers a choice of stage. A
// directory format writes into the directory out, which is created, one
// histogram file per stage. It returns the files written.
func Write(f Format, out string, stdout io.Writer, names []string, ps []*contract.Profile, o Options) ([]string, error) {
	if err := f.CheckOutput(out); err != nil {
		return nil, err
	}
	if f.Directory() {
		if err := atomicfile.MkdirAll(out, 0o700); err != nil {
			return nil, err
		}
		return writeGprof(out, f == FormatKaffeAs, names, ps, o.Files)
	}
	write := func(w io.Writer) error { return writeStages(w, f, names, ps, o) }
	if out == "" {
		return nil, write(stdout)
	}
	// A report names the functions of the processes sampled, other
	// users' when root sampled them: private as the recording.
	return []string{out}, atomicfile.Private.Write(out, write)
}

// writeOne writes one profile in the stream format f.
func writeOne(w io.Writer, f Format, p *contract.Profile, o Options) error {
	switch f {
	case FormatText:
		return Text(w, p, o)
	case FormatJSON:
		return JSON(w, p, o)
	case FormatFolded:
		return Folded(w, p, o)
	case FormatHTML:
		return HTML(w, p, o)
	case FormatPProf:
		return writePProf(w, p)
	}
	return fmt.Errorf("report: %s is not a stream format", f)
}

func writeStages(w io.Writer, f Format, names []string, ps []*contract.Profile, o Options) error {
	if len(ps) == 1 {
		return writeOne(w, f, ps[0], o)
	}
	switch f {
	case FormatText:
		for i, p := range ps {
			if i > 0 {
				fmt.Fprintln(w)
			}
			fmt.Fprintf(w, "# ======== stage %s ========\n", names[i])
			if err := writeOne(w, f, p, o); err != nil {
				return err
			}
		}
		return nil
	case FormatJSON:
		type staged struct {
			Stage  string          `json:"stage"`
			Report json.RawMessage `json:"report"`
		}
		var all []staged
		for i, p := range ps {
			var b bytes.Buffer
			if err := writeOne(&b, f, p, o); err != nil {
				return err
			}
			all = append(all, staged{names[i], b.Bytes()})
		}
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(all)
	case FormatFolded:
		bw := bufio.NewWriter(w)
		for i, p := range ps {
			var b bytes.Buffer
			if err := writeOne(&b, f, p, o); err != nil {
				return err
			}
			for line := range strings.Lines(b.String()) {
				fmt.Fprintf(bw, "[stage %s];%s", names[i], line)
			}
		}
		return bw.Flush()
	case FormatHTML:
		return writeHTML(w, names, ps, o)
	}
	return fmt.Errorf("--format %s writes one stage at a time, not %d", f, len(ps))
}
