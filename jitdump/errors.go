package jitdump

import (
	"errors"
	"fmt"
)

// ErrTruncated is matched (errors.Is) by the error that ends reading when the
// file stops inside a record: normal while the runtime is still writing, or
// after it crashed. Every complete record before it has been delivered.
var ErrTruncated = errors.New("file ends inside a record")

// FormatError reports bytes that break the format, with the offset of the
// record (or header field) that holds them.
type FormatError struct {
	File string // set when the reader was given a name
	Off  int64
	Msg  string
}

func (e *FormatError) Error() string {
	return fmt.Sprintf("%soffset %#x: %s", filePrefix(e.File), e.Off, e.Msg)
}

// TruncatedError is the ErrTruncated condition with its details.
type TruncatedError struct {
	File string
	Off  int64  // of the record (or header) cut short
	Want uint64 // bytes it declares
	Have int64  // bytes present
}

func (e *TruncatedError) Error() string {
	return fmt.Sprintf("%soffset %#x: %s: %d of %d bytes present", filePrefix(e.File), e.Off, ErrTruncated, e.Have, e.Want)
}

func (e *TruncatedError) Is(target error) bool { return target == ErrTruncated }

func filePrefix(file string) string {
	if file == "" {
		return "jitdump: "
	}
	return file + ": "
}
