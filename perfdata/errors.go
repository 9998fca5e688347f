package perfdata

import (
	"errors"
	"fmt"
)

// ErrTruncated is matched (errors.Is) by the error that ends reading when the
// file stops inside a record or before the end its header declares: perf
// record was killed, or the file is still being written. Every complete
// record before it has been delivered.
var ErrTruncated = errors.New("file ends inside a record")

// FormatError reports bytes that break the format, with the offset of the
// record (or header field) that holds them.
type FormatError struct {
	File string // set when the reader was given a name
	Off  int64
	Msg  string
}

// Error says what is wrong and where: the file, when named, and the offset.
func (e *FormatError) Error() string {
	return fmt.Sprintf("%soffset %#x: %s", filePrefix(e.File), e.Off, e.Msg)
}

// TruncatedError is the ErrTruncated condition with its details.
type TruncatedError struct {
	File string
	Off  int64  // of the record, section or header cut short
	Want uint64 // bytes it declares
	Have int64  // bytes present
}

// Error says where the file is cut short and how much is missing.
func (e *TruncatedError) Error() string {
	return fmt.Sprintf("%soffset %#x: %s: %d of %d bytes present", filePrefix(e.File), e.Off, ErrTruncated, e.Have, e.Want)
}

// Is makes a *TruncatedError match ErrTruncated.
func (e *TruncatedError) Is(target error) bool { return target == ErrTruncated }

func filePrefix(file string) string {
	if file == "" {
		return "perfdata: "
	}
	return file + ": "
}
