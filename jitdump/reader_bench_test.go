package jitdump_test

import (
	"io"
	"os"
	"testing"

	"github.com/jitprof/jitprof/internal/fixtures"
	"github.com/jitprof/jitprof/jitdump"
)

// countRecords reads every record, touching what a stats pass needs.
func countRecords(b *testing.B, r *jitdump.Reader) (n int, code uint64) {
	for {
		rec, err := r.Next()
		if err == io.EOF {
			return n, code
		}
		if err != nil {
			b.Fatal(err)
		}
		if l, ok := rec.(*jitdump.CodeLoad); ok {
			code += l.CodeSize
		}
		n++
	}
}

// BenchmarkRead reads real dumps four ways: mapped (the reader over the
// mapping, no copies), streamed from the file, by Scan, and, as the
// yardstick, the file's bytes merely read into a buffer, as cat does.
func BenchmarkRead(b *testing.B) {
	for _, rt := range []fixtures.Runtime{fixtures.Node, fixtures.Erlang} {
		path := fixtures.Dump(b, rt)
		st, err := os.Stat(path)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(string(rt)+"/mmap", func(b *testing.B) {
			b.SetBytes(st.Size())
			for b.Loop() {
				f, err := jitdump.Open(path)
				if err != nil {
					b.Fatal(err)
				}
				countRecords(b, f.Reader)
				f.Close()
			}
		})
		b.Run(string(rt)+"/stream", func(b *testing.B) {
			b.SetBytes(st.Size())
			for b.Loop() {
				f, err := os.Open(path)
				if err != nil {
					b.Fatal(err)
				}
				r, err := jitdump.NewReader(f)
				if err != nil {
					b.Fatal(err)
				}
				countRecords(b, r)
				f.Close()
			}
		})
		b.Run(string(rt)+"/scan", func(b *testing.B) {
			b.SetBytes(st.Size())
			for b.Loop() {
				f, err := jitdump.Open(path)
				if err != nil {
					b.Fatal(err)
				}
				var code uint64
				err = f.Scan(func(rec jitdump.Record) error {
					if l, ok := rec.(*jitdump.CodeLoad); ok {
						code += l.CodeSize
					}
					return nil
				})
				if err != nil {
					b.Fatal(err)
				}
				f.Close()
			}
		})
		b.Run(string(rt)+"/read-bytes-only", func(b *testing.B) {
			b.SetBytes(st.Size())
			buf := make([]byte, 256<<10)
			for b.Loop() {
				f, err := os.Open(path)
				if err != nil {
					b.Fatal(err)
				}
				for {
					if _, err := f.Read(buf); err != nil {
						break
					}
				}
				f.Close()
			}
		})
	}
}
