// Package perfmap reads and writes perf maps: the /tmp/perf-<pid>.map files
// in which just-in-time compilers name the code they generate, for Linux perf
// and other profilers.
//
// A map is text, one function per line:
//
//	START SIZE name
//
// START and SIZE are hex numbers, with or without a 0x prefix, each followed
// by one space; the name is the rest of the line and may hold spaces. Runtimes
// differ: node --perf-basic-prof, PHP and CPython -X perf write bare hex, Java
// writes 0x and pads with zeros to 16 digits, Erlang puts 0x on START only.
// Either case of hex digit is accepted. Line ends may be LF or CRLF;
// whitespace at the end of a line is not part of the name, and blank lines
// are skipped. Write and Writer write bare lower-case hex, the form perf's
// Documentation/jit-interface.txt specifies.
//
// A line with a SIZE of 0 is well formed and read as an entry, but it names
// no address, so a [Table] ignores it. A line whose START+SIZE does not fit
// in 64 bits is bad.
//
// A map has no timestamps. When a runtime frees code and reuses its
// addresses, it appends a line for the new function and leaves the old one:
// where two lines cover the same address, the later line is the one that
// holds. [Table] gives that view.
package perfmap

import (
	"fmt"
	"io"
	"strings"
	"unsafe"

	"github.com/jitprof/jitprof/internal/foreign"
)

// Entry is one line of a map: the function Name occupies the Size bytes from
// address Start.
type Entry struct {
	Start uint64
	Size  uint64
	Name  string
	Line  int // 1-based line number in the map read; ignored when writing
}

// LineError reports a line that is not START SIZE name.
type LineError struct {
	File   string // set by ParseFile
	Line   int    // 1-based
	Offset int64  // of the line's first byte
	Text   string // the line without its end or trailing whitespace, cut to 120 bytes
	Msg    string // what is wrong with it
}

// maxText keeps errors printable when the input is not a map at all, such as
// a binary file with no newline in it.
const maxText = 120

func (e *LineError) Error() string {
	if e.File == "" {
		return fmt.Sprintf("perfmap: line %d: %s: %q", e.Line, e.Msg, e.Text)
	}
	return fmt.Sprintf("%s:%d: %s: %q", e.File, e.Line, e.Msg, e.Text)
}

// Parse reads a map to its end. It returns the entries of the good lines in
// file order, and an error for each bad line; a bad line does not stop
// reading. The error result is for I/O failures only; with one, Parse
// returns no entries.
//
// The names are parts of one string holding the whole input, which saves an
// allocation per entry: a name kept keeps the input (strings.Clone frees it).
func Parse(r io.Reader) ([]Entry, []*LineError, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, nil, err
	}
	entries, errs := parse(data, "")
	return entries, errs, nil
}

// ParseFile is Parse of the named file, with the name in its LineErrors.
// A runtime may still be appending to the map: ParseFile reads the lines
// present when it is called, and the last one may be cut short.
func ParseFile(name string) ([]Entry, []*LineError, error) {
	f, err := foreign.Open(name, foreign.Rules{})
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	data, err := foreign.ReadAll(f, MaxFileSize)
	if err != nil {
		return nil, nil, err
	}
	entries, errs := parse(data, name)
	return entries, errs, nil
}

// MaxFileSize bounds the perf map ParseFile reads: a million functions'
// lines are about 100 MB.
const MaxFileSize = 1 << 30

// ParseData is Parse of a map already read, named name in its LineErrors;
// the entries' names alias data, which must not change after.
func ParseData(data []byte, name string) ([]Entry, []*LineError) {
	return parse(data, name)
}

// shortestLine is the length of the shortest good line with its newline,
// "0 0 x\n"; it bounds the entries a buffer can hold.
const shortestLine = 6

// parse takes ownership of data: the names alias it.
func parse(data []byte, file string) ([]Entry, []*LineError) {
	// Nothing writes data after this, so the string stays immutable.
	s := unsafe.String(unsafe.SliceData(data), len(data))
	n := min(strings.Count(s, "\n")+1, len(s)/shortestLine+1)
	entries := make([]Entry, 0, n)
	var errs []*LineError
	for line, off := 1, 0; off < len(s); line++ {
		end := strings.IndexByte(s[off:], '\n')
		if end < 0 {
			end = len(s)
		} else {
			end += off
		}
		text := strings.TrimRight(s[off:end], " \t\r")
		if text != "" {
			e, msg := parseLine(text)
			if msg == "" {
				e.Line = line
				entries = append(entries, e)
			} else {
				errs = append(errs, &LineError{
					File:   file,
					Line:   line,
					Offset: int64(off),
					Text:   text[:min(len(text), maxText)],
					Msg:    msg,
				})
			}
		}
		off = end + 1
	}
	return entries, errs
}

// parseLine reads one line, with no end and no trailing whitespace. It
// returns what is wrong with it, or "".
func parseLine(s string) (Entry, string) {
	start, rest, msg := parseField(s, "start", "missing size")
	if msg != "" {
		return Entry{}, msg
	}
	size, name, msg := parseField(rest, "size", "missing name")
	if msg != "" {
		return Entry{}, msg
	}
	if start+size < start {
		return Entry{}, "start+size overflows 64 bits"
	}
	return Entry{Start: start, Size: size, Name: name}, ""
}

// parseField reads a hex number, with or without 0x, and the space after it.
// The rest of s is never empty, since trailing whitespace is gone.
func parseField(s, field, missingNext string) (v uint64, rest, msg string) {
	if len(s) >= 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X') {
		s = s[2:]
	}
	i := 0
	for ; i < len(s); i++ {
		d := unhex[s[i]]
		if d < 0 {
			break
		}
		if v>>60 != 0 {
			return 0, "", field + " overflows 64 bits"
		}
		v = v<<4 | uint64(d)
	}
	switch {
	case i == 0:
		return 0, "", field + " is not a hex number"
	case i == len(s):
		return 0, "", missingNext
	case s[i] != ' ':
		return 0, "", field + " is not a hex number"
	}
	return v, s[i+1:], ""
}

var unhex = func() (t [256]int8) {
	for i := range t {
		t[i] = -1
	}
	for i := range 10 {
		t['0'+i] = int8(i)
	}
	for i := range 6 {
		t['a'+i] = int8(10 + i)
		t['A'+i] = int8(10 + i)
	}
	return t
}()
