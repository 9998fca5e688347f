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
	// What is cut short, when not a record: "the file header", "the attrs
	// section" and so on.
	What string
	// Data, when the file ends before the end its header declares for the
	// data section (a copy taken while perf record ran, a full disk), is
	// that section as declared, and DataHave the bytes of it present. Off
	// is then where the whole records, all delivered, end; Want and Have
	// are those of the record the end cuts, 0 when it falls between two.
	// The feature sections, after the data, are missing too.
	Data     *Section
	DataHave int64
}

// Error says where the file is cut short and how much is missing.
func (e *TruncatedError) Error() string {
	if e.Data != nil {
		where := "between two records"
		if e.Want > 0 {
			where = fmt.Sprintf("%d bytes into a record of %d", e.Have, e.Want)
		}
		return fmt.Sprintf("%soffset %#x: file ends inside the data section, %s: %d of the %d bytes the header declares for the section are present; "+
			"the records from %#x on and the feature sections are missing", filePrefix(e.File), e.Off, where, e.DataHave, e.Data.Size, e.Off)
	}
	if e.What != "" {
		return fmt.Sprintf("%soffset %#x: file ends inside %s: %d of %d bytes present", filePrefix(e.File), e.Off, e.What, e.Have, e.Want)
	}
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
