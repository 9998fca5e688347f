package jitdump

// SetScanPartSize makes Scan read f in parts of n bytes, so that tests can
// cut records at any byte with small inputs.
func SetScanPartSize(f *File, n int) { f.partSize = n }
