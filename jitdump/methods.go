package jitdump

import (
	"bytes"
	"encoding/binary"
	"fmt"
)

// TypeMethodNames is jitprof's extension record naming the methods of one
// class by the runtime's address of each, outside the spec: HotSpot's
// Method*, which an interpreted frame holds (jitprof's JVMTI agent writes
// one record per class, for the classes loaded when it starts and each
// class prepared after), so that an unwinder reading the frame can name
// the method the interpreter runs. A later record naming the same address
// supersedes an earlier one from its time on: a class unloaded frees its
// methods' memory for another's. perf skips it, as any id it does not
// know.
//
// Layout after the record header:
//
//	u32 nr_method
//	u32 reserved
//	nr_method × u64 method   the runtime's address of each method
//	char class[]             the class's signature (LWork;), NUL-terminated
//	nr_method × char name[]  each method's name and signature (fib(I)J),
//	                         NUL-terminated: the method's full name, as
//	                         CODE_LOAD names compiled ones, is class + name
const TypeMethodNames RecordType = 0x4A500002

const methodNamesFixed = RecordHeaderSize + 8

// MethodNames names the methods of one class (see TypeMethodNames).
type MethodNames struct {
	RecordHeader
	Class   string
	Methods []uint64 // the runtime's address of each
	Names   []string // Names[i] is Methods[i]'s name and signature
}

// decodeMethodNames decodes a record that decode has checked holds its fixed fields.
func decodeMethodNames(h RecordHeader, b []byte, o binary.ByteOrder, invalid func(string, ...any) Record) Record {
	n := uint64(o.Uint32(b[RecordHeaderSize:]))
	rest := b[methodNamesFixed:]
	// Each method takes 8 bytes and a NUL at least.
	if n > uint64(len(rest)/9) {
		return invalid("nr_method %d cannot fit in %d bytes", n, len(rest))
	}
	rec := &MethodNames{RecordHeader: h, Methods: make([]uint64, n), Names: make([]string, n)}
	for i := range rec.Methods {
		rec.Methods[i] = o.Uint64(rest[8*i:])
	}
	rest = rest[8*n:]
	nul := bytes.IndexByte(rest, 0)
	if nul < 0 {
		return invalid("class name has no terminating NUL within the record")
	}
	rec.Class = aliasString(rest[:nul])
	rest = rest[nul+1:]
	for i := range rec.Names {
		if nul = bytes.IndexByte(rest, 0); nul < 0 {
			return invalid("the name of method %d of %d has no terminating NUL within the record", i+1, n)
		}
		rec.Names[i] = aliasString(rest[:nul])
		rest = rest[nul+1:]
	}
	return rec
}

func appendMethodNames(b []byte, o binary.ByteOrder, r *MethodNames) ([]byte, error) {
	if len(r.Names) != len(r.Methods) || uint64(len(r.Methods)) > 1<<32-1 {
		return b, fmt.Errorf("jitdump: %s %q: %d methods and %d names", TypeMethodNames, r.Class, len(r.Methods), len(r.Names))
	}
	size := methodNamesFixed + 8*len(r.Methods) + len(r.Class) + 1
	for _, name := range r.Names {
		size += len(name) + 1
	}
	b, p := beginRecord(b, o, &r.RecordHeader, TypeMethodNames, size)
	o.PutUint32(p[RecordHeaderSize:], uint32(len(r.Methods)))
	q := p[methodNamesFixed:]
	for _, m := range r.Methods {
		o.PutUint64(q, m)
		q = q[8:]
	}
	q = q[copy(q, r.Class)+1:]
	for _, name := range r.Names {
		q = q[copy(q, name)+1:]
	}
	return b, nil
}
