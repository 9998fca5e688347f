package main

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/jitprof/jitprof/jitdump"
	"github.com/spf13/cobra"
)

type dumpOptions struct {
	json  bool
	stats bool
	lines bool
}

func newDumpCmd() *cobra.Command {
	var opts dumpOptions
	cmd := &cobra.Command{
		Use:   "dump FILE",
		Short: "Print the records of a jitdump file",
		Long: `Prints one line per record of a jitdump file: time (CLOCK_MONOTONIC seconds, as
perf script shows them), type, address, size, code index and name. jitprof's
own records are shown too: JITPROF_INLINE (a method instance inlined into a
loaded function: its code range, runtime ids, name and file), JITPROF_STAGE
(a stage mark: the stage's name and whether accounting is on) and
JITPROF_METHODS (a Java class's methods by the address of each, for
interpreted frames: with --lines, each method).

Exit status: 0 when the file could be read (also when its last record is cut
short, as it is while the runtime is still writing), 1 when it is corrupt
part way (the records before the damage are printed), 2 when it is not a
jitdump file or cannot be read.`,
		Example: `  jitprof dump jit-4242.dump
  jitprof dump --lines jit-4242.dump      # with the source lines of DEBUG_INFO and JITPROF_INLINE
  jitprof dump --json jit-4242.dump | jq 'select(.type=="CODE_LOAD") | .name'
  jitprof dump --stats --json jit-4242.dump`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runDump(cmd.OutOrStdout(), cmd.ErrOrStderr(), args[0], opts)
		},
	}
	f := cmd.Flags()
	f.BoolVar(&opts.json, "json", false, "one JSON object per record (with --stats: one for the file)")
	f.BoolVar(&opts.stats, "stats", false, "print a summary of the file instead of its records")
	f.BoolVar(&opts.lines, "lines", false, "print the line entries of DEBUG_INFO and JITPROF_INLINE records")
	return cmd
}

func runDump(stdout, stderr io.Writer, path string, opts dumpOptions) error {
	f, err := jitdump.Open(path)
	if err != nil {
		return &exitError{code: 2, err: err}
	}
	defer f.Close()
	f.ReuseRecord = true // neither pass keeps records
	out := bufio.NewWriterSize(stdout, 256<<10)
	defer out.Flush()

	var end error
	if opts.stats {
		st := collectStats(f)
		end = st.end
		if opts.json {
			err = json.NewEncoder(out).Encode(st)
		} else {
			err = st.print(out)
		}
	} else {
		p := recordPrinter{out: out, lines: opts.lines, names: make(map[uint64]string)}
		if opts.json {
			p.enc = json.NewEncoder(out)
		}
		end = p.printAll(f)
	}
	if err != nil {
		return err
	}
	return endStatus(out, stderr, end)
}

// endStatus turns the condition that ended reading into the exit status:
// truncation is normal for a dump still being written, corruption is not.
func endStatus(out *bufio.Writer, stderr io.Writer, end error) error {
	switch {
	case end == nil:
		return nil
	case errors.Is(end, jitdump.ErrTruncated):
		out.Flush()
		fmt.Fprintln(stderr, "jitprof: note:", end)
		return nil
	}
	var fe *jitdump.FormatError
	if errors.As(end, &fe) {
		return &exitError{code: 1, err: end}
	}
	return &exitError{code: 2, err: end}
}

type recordPrinter struct {
	out   *bufio.Writer
	enc   *json.Encoder
	lines bool
	names map[uint64]string // code index -> name, to name what CODE_MOVE moves; copies, as records are reused
}

func (p *recordPrinter) printAll(f *jitdump.File) error {
	if p.enc == nil {
		fmt.Fprintf(p.out, "%-18s %-14s %-18s %10s %8s  %s\n", "TIME", "TYPE", "ADDRESS", "SIZE", "INDEX", "NAME")
	}
	return f.Scan(func(rec jitdump.Record) error {
		if p.enc != nil {
			return p.enc.Encode(p.jsonRecord(rec))
		}
		p.text(rec)
		return nil
	})
}

func seconds(ns uint64) string { return fmt.Sprintf("%d.%09d", ns/1e9, ns%1e9) }

func (p *recordPrinter) text(rec jitdump.Record) {
	h := rec.Header()
	line := func(addr string, size, index any, name string) {
		fmt.Fprintf(p.out, "%-18s %-14s %-18s %10v %8v  %s\n", seconds(h.Timestamp), h.Type, addr, size, index, name)
	}
	hex := func(v uint64) string { return fmt.Sprintf("%#x", v) }
	switch r := rec.(type) {
	case *jitdump.CodeLoad:
		p.names[r.CodeIndex] = strings.Clone(r.Name)
		line(hex(r.CodeAddr), r.CodeSize, r.CodeIndex, r.Name)
	case *jitdump.CodeMove:
		line(hex(r.NewCodeAddr), r.CodeSize, r.CodeIndex, fmt.Sprintf("%s (from %#x)", p.names[r.CodeIndex], r.OldCodeAddr))
	case *jitdump.DebugInfo:
		line(hex(r.CodeAddr), "-", "-", fmt.Sprintf("%d line entries", r.NumEntries))
		if p.lines {
			for e := range r.Entries() {
				fmt.Fprintf(p.out, "    %#x %s:%d", e.Addr, e.File, e.Line)
				if e.Discrim != 0 {
					fmt.Fprintf(p.out, " discriminator %d", e.Discrim)
				}
				p.out.WriteByte('\n')
			}
		}
	case *jitdump.InlineInfo:
		desc := fmt.Sprintf("%s [%#x..%#x) id %d parent %d root %d", r.Name, r.CodeAddr, r.CodeAddr+r.CodeSize, r.MethodID, r.ParentID, r.RootID)
		if r.File != "" {
			desc += " file " + r.File
		}
		line(hex(r.CodeAddr), r.CodeSize, r.CodeIndex, fmt.Sprintf("%s, %d line entries", desc, len(r.Lines)))
		if p.lines {
			for _, e := range r.Lines {
				fmt.Fprintf(p.out, "    %#x %s:%d\n", e.Addr, r.File, e.Line)
			}
		}
	case *jitdump.StageMark:
		accounting := "on"
		if !r.Accounting {
			accounting = "off"
		}
		line("-", "-", "-", fmt.Sprintf("stage %q, accounting %s", r.Name, accounting))
	case *jitdump.MethodNames:
		line("-", "-", "-", fmt.Sprintf("class %s, %d methods", r.Class, len(r.Methods)))
		if p.lines {
			for i, m := range r.Methods {
				fmt.Fprintf(p.out, "    %#x %s%s\n", m, r.Class, r.Names[i])
			}
		}
	case *jitdump.UnwindingInfo:
		line("-", len(r.EHFrame)+len(r.EHFrameHdr), "-", fmt.Sprintf("eh_frame %d bytes, eh_frame_hdr %d bytes, mapped %d", len(r.EHFrame), len(r.EHFrameHdr), r.MappedSize))
	case *jitdump.CodeClose:
		line("-", "-", "-", "")
	case *jitdump.Unknown:
		line("-", h.Size, "-", "record id unknown, skipped")
	case *jitdump.Invalid:
		line("-", h.Size, "-", "INVALID: "+r.Err.Msg)
	}
}

// jsonRecord is a record as one flat JSON object; fields that do not apply
// to a type are left out.
type jsonRecord struct {
	Offset      int64           `json:"offset"`
	Time        uint64          `json:"time"`
	Type        string          `json:"type"`
	Size        uint32          `json:"size"`
	Pid         *uint32         `json:"pid,omitempty"`
	Tid         *uint32         `json:"tid,omitempty"`
	VMA         *uint64         `json:"vma,omitempty"`
	CodeAddr    *uint64         `json:"code_addr,omitempty"`
	OldCodeAddr *uint64         `json:"old_code_addr,omitempty"`
	NewCodeAddr *uint64         `json:"new_code_addr,omitempty"`
	CodeSize    *uint64         `json:"code_size,omitempty"`
	CodeIndex   *uint64         `json:"code_index,omitempty"`
	Name        *string         `json:"name,omitempty"`
	MethodID    *uint32         `json:"method_id,omitempty"`
	ParentID    *uint32         `json:"parent_id,omitempty"`
	RootID      *uint32         `json:"root_id,omitempty"`
	File        *string         `json:"file,omitempty"`
	Accounting  *bool           `json:"accounting,omitempty"`
	NumEntries  *uint64         `json:"nr_entry,omitempty"`
	Entries     []jsonLineEntry `json:"entries,omitempty"`
	EHFrame     *int            `json:"eh_frame_size,omitempty"`
	EHFrameHdr  *int            `json:"eh_frame_hdr_size,omitempty"`
	MappedSize  *uint64         `json:"mapped_size,omitempty"`
	ID          *uint32         `json:"id,omitempty"`
	Error       string          `json:"error,omitempty"`
}

type jsonLineEntry struct {
	Addr    uint64 `json:"addr"`
	File    string `json:"file"`
	Line    uint32 `json:"line"`
	Discrim uint32 `json:"discrim,omitempty"`
}

func ptr[T any](v T) *T { return &v }

func (p *recordPrinter) jsonRecord(rec jitdump.Record) jsonRecord {
	h := rec.Header()
	j := jsonRecord{Offset: h.Offset, Time: h.Timestamp, Type: h.Type.String(), Size: h.Size}
	switch r := rec.(type) {
	case *jitdump.CodeLoad:
		j.Pid, j.Tid, j.VMA, j.CodeAddr, j.CodeSize, j.CodeIndex, j.Name = &r.Pid, &r.Tid, &r.VMA, &r.CodeAddr, &r.CodeSize, &r.CodeIndex, &r.Name
		p.names[r.CodeIndex] = strings.Clone(r.Name)
	case *jitdump.CodeMove:
		j.Pid, j.Tid, j.VMA, j.OldCodeAddr, j.NewCodeAddr, j.CodeSize, j.CodeIndex = &r.Pid, &r.Tid, &r.VMA, &r.OldCodeAddr, &r.NewCodeAddr, &r.CodeSize, &r.CodeIndex
		if name, ok := p.names[r.CodeIndex]; ok {
			j.Name = &name
		}
	case *jitdump.DebugInfo:
		j.CodeAddr, j.NumEntries = &r.CodeAddr, &r.NumEntries
		if p.lines {
			for e := range r.Entries() {
				j.Entries = append(j.Entries, jsonLineEntry{Addr: e.Addr, File: e.File, Line: e.Line, Discrim: e.Discrim})
			}
		}
	case *jitdump.InlineInfo:
		j.CodeIndex, j.CodeAddr, j.CodeSize, j.MethodID, j.ParentID, j.RootID, j.Name, j.File = &r.CodeIndex, &r.CodeAddr, &r.CodeSize, &r.MethodID, &r.ParentID, &r.RootID, &r.Name, &r.File
		j.NumEntries = ptr(uint64(len(r.Lines)))
		if p.lines {
			for _, e := range r.Lines {
				j.Entries = append(j.Entries, jsonLineEntry{Addr: e.Addr, File: r.File, Line: e.Line})
			}
		}
	case *jitdump.StageMark:
		j.Name, j.Accounting = &r.Name, &r.Accounting
	case *jitdump.MethodNames:
		j.Name = &r.Class
		j.NumEntries = ptr(uint64(len(r.Methods)))
	case *jitdump.UnwindingInfo:
		j.EHFrame, j.EHFrameHdr, j.MappedSize = ptr(len(r.EHFrame)), ptr(len(r.EHFrameHdr)), &r.MappedSize
	case *jitdump.Unknown:
		j.ID = ptr(uint32(h.Type))
		j.Type = "UNKNOWN"
	case *jitdump.Invalid:
		j.Error = r.Err.Msg
	}
	return j
}

// stats summarises a dump; its JSON form is documented in the README.
type stats struct {
	ByteOrder    string       `json:"byte_order"`
	Version      uint32       `json:"version"`
	HeaderSize   uint32       `json:"header_size"`
	ElfMach      uint32       `json:"elf_mach"`
	Pid          uint32       `json:"pid"`
	Flags        uint64       `json:"flags"`
	Timestamp    uint64       `json:"timestamp"`
	Records      recordCounts `json:"records"`
	CodeBytes    uint64       `json:"code_bytes"`
	DebugEntries uint64       `json:"debug_entries"`
	FirstTime    uint64       `json:"first_time"`
	LastTime     uint64       `json:"last_time"`
	Truncated    bool         `json:"truncated"`
	Error        string       `json:"error,omitempty"` // corruption that stopped reading
	end          error
}

type recordCounts struct {
	CodeLoad      uint64 `json:"code_load"`
	CodeMove      uint64 `json:"code_move"`
	DebugInfo     uint64 `json:"debug_info"`
	Close         uint64 `json:"close"`
	UnwindingInfo uint64 `json:"unwinding_info"`
	Inline        uint64 `json:"jitprof_inline"`
	Stage         uint64 `json:"jitprof_stage"`
	Methods       uint64 `json:"jitprof_methods"`
	Unknown       uint64 `json:"unknown"`
	Invalid       uint64 `json:"invalid"`
}

func collectStats(f *jitdump.File) *stats {
	h := f.Header()
	st := &stats{ByteOrder: "little", Version: h.Version, HeaderSize: h.Size, ElfMach: h.ElfMach, Pid: h.Pid, Flags: h.Flags, Timestamp: h.Timestamp}
	if h.ByteOrder == binary.BigEndian {
		st.ByteOrder = "big"
	}
	c := &st.Records
	st.end = f.Scan(func(rec jitdump.Record) error {
		t := rec.Header().Timestamp
		if st.FirstTime == 0 || t < st.FirstTime {
			st.FirstTime = t
		}
		st.LastTime = max(st.LastTime, t)
		switch r := rec.(type) {
		case *jitdump.CodeLoad:
			c.CodeLoad++
			st.CodeBytes += r.CodeSize
		case *jitdump.CodeMove:
			c.CodeMove++
		case *jitdump.DebugInfo:
			c.DebugInfo++
			st.DebugEntries += r.NumEntries
		case *jitdump.CodeClose:
			c.Close++
		case *jitdump.UnwindingInfo:
			c.UnwindingInfo++
		case *jitdump.InlineInfo:
			c.Inline++
		case *jitdump.StageMark:
			c.Stage++
		case *jitdump.MethodNames:
			c.Methods++
		case *jitdump.Unknown:
			c.Unknown++
		case *jitdump.Invalid:
			c.Invalid++
		}
		return nil
	})
	st.Truncated = errors.Is(st.end, jitdump.ErrTruncated)
	if st.end != nil && !st.Truncated {
		st.Error = st.end.Error()
	}
	return st
}

func (st *stats) print(w io.Writer) error {
	c := st.Records
	_, err := fmt.Fprintf(w, `byte order     %s
version        %d
header size    %d bytes
elf machine    %d
pid            %d
flags          %#x
records        %d CODE_LOAD, %d CODE_MOVE, %d DEBUG_INFO, %d CODE_CLOSE, %d UNWINDING_INFO, %d JITPROF_INLINE, %d JITPROF_STAGE, %d JITPROF_METHODS, %d unknown, %d invalid
code bytes     %d
debug entries  %d
time span      %s .. %s
truncated      %v
`, st.ByteOrder, st.Version, st.HeaderSize, st.ElfMach, st.Pid, st.Flags,
		c.CodeLoad, c.CodeMove, c.DebugInfo, c.Close, c.UnwindingInfo, c.Inline, c.Stage, c.Methods, c.Unknown, c.Invalid,
		st.CodeBytes, st.DebugEntries, seconds(st.FirstTime), seconds(st.LastTime), st.Truncated)
	return err
}
