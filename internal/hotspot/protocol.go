package hotspot

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// The attach protocol's limits, as HotSpot's attach listener has them
// (attachListener.hpp): a longer name or argument makes it drop the
// connection without a word, so they are refused here with one.
const (
	protocolVersion = "1"
	maxCommandLen   = 16   // AttachOperation::name_length_max
	maxArgLen       = 1024 // AttachOperation::arg_length_max
	maxArgs         = 3    // AttachOperation::arg_count_max
	// maxReply bounds what is read of a reply: a load's is one line, and
	// a listener that is not HotSpot's could send without end.
	maxReply = 64 << 10
	// badVersion is the status of a listener that speaks another version.
	badVersion = 101
)

// request is a command in protocol 1: the version, the command and
// exactly maxArgs arguments, each ended by a NUL; the listener reads
// exactly that many strings, so missing arguments are sent empty.
func request(command string, args ...string) ([]byte, error) {
	if len(args) > maxArgs {
		return nil, fmt.Errorf("%s: %d arguments, the attach protocol carries %d", command, len(args), maxArgs)
	}
	if command == "" || len(command) > maxCommandLen || strings.IndexByte(command, 0) >= 0 {
		return nil, fmt.Errorf("%q is not a command of the attach protocol (1 to %d bytes, no NUL)", command, maxCommandLen)
	}
	b := append([]byte(protocolVersion), 0)
	b = append(append(b, command...), 0)
	for i := range maxArgs {
		var arg string
		if i < len(args) {
			arg = args[i]
		}
		if len(arg) > maxArgLen || strings.IndexByte(arg, 0) >= 0 {
			return nil, fmt.Errorf("%s: argument %d is %d bytes or holds a NUL; the JVM takes at most %d bytes", command, i+1, len(arg), maxArgLen)
		}
		b = append(append(b, arg...), 0)
	}
	return b, nil
}

// reply is what the JVM answered to a command.
type reply struct {
	// Status is the listener's: 0 if the command ran.
	Status int
	// Text is the command's output, or why it did not run.
	Text string
}

// readReply reads a reply: a status line, then text until the JVM closes
// the connection, at most maxReply bytes in all.
func readReply(r io.Reader) (reply, error) {
	br := bufio.NewReader(io.LimitReader(r, maxReply))
	line, err := br.ReadString('\n')
	if err != nil && (err != io.EOF || line == "") {
		if err == io.EOF {
			return reply{}, errors.New("the JVM closed the connection without a reply")
		}
		return reply{}, fmt.Errorf("reading the reply's status: %w", err)
	}
	status, perr := strconv.Atoi(strings.TrimSuffix(line, "\n"))
	if perr != nil {
		return reply{}, fmt.Errorf("the reply's status %s is not a number", truncate(line))
	}
	text, err := io.ReadAll(br)
	if err != nil {
		return reply{}, fmt.Errorf("reading the reply after status %d: %w", status, err)
	}
	return reply{Status: status, Text: string(text)}, nil
}

// LoadError is a load the JVM refused or an agent that failed.
type LoadError struct {
	// Status is the listener's status, non-zero when the library could
	// not be loaded (or the command not run).
	Status int
	// Code is what Agent_OnAttach returned, when it ran.
	Code int
	// Text is the JVM's message.
	Text string
}

func (e *LoadError) Error() string {
	switch {
	case e.Status == badVersion:
		return "the JVM speaks another version of the attach protocol"
	case e.Status != 0:
		return fmt.Sprintf("the JVM did not load the agent (status %d): %s", e.Status, oneLine(e.Text))
	case e.Code != 0:
		return fmt.Sprintf("the agent's Agent_OnAttach returned %d", e.Code)
	}
	return "the JVM's answer to load is not a return code: " + oneLine(e.Text)
}

// loadResult says whether a reply to load means the agent is loaded and
// started. Since JDK 9 the text is "return code: N", N being what
// Agent_OnAttach returned; before, N alone.
func loadResult(r reply) error {
	if r.Status != 0 {
		return &LoadError{Status: r.Status, Text: r.Text}
	}
	text := strings.TrimSpace(r.Text)
	code, err := strconv.Atoi(strings.TrimPrefix(text, "return code: "))
	if err != nil {
		return &LoadError{Text: r.Text}
	}
	if code != 0 {
		return &LoadError{Code: code, Text: r.Text}
	}
	return nil
}

// oneLine is a JVM's message for a log line: its lines joined, bounded.
func oneLine(s string) string {
	return truncate(strings.Join(strings.Fields(s), " "))
}

func truncate(s string) string {
	const max = 200
	if len(s) > max {
		return strconv.Quote(s[:max]) + "..."
	}
	return strconv.Quote(s)
}
