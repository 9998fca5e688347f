package perfmap

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"
)

// benchMap is a map of n lines in the dialects seen, shaped like the maps
// node and Java write: ascending addresses, short sizes, names of 20 to 100
// bytes, some reused ranges.
func benchMap(n int) []byte {
	var b bytes.Buffer
	rng := rand.New(rand.NewPCG(1, 2))
	addr := uint64(0x7fa554ec7000)
	for i := range n {
		size := 0x20 + rng.Uint64N(0x800)
		switch i % 3 {
		case 0:
			fmt.Fprintf(&b, "%x %x JS:*fn%d /app/newfunctions.js:%d:13\n", addr, size, i, i)
		case 1:
			fmt.Fprintf(&b, "0x%016x 0x%016x void java.lang.Foo%d.bar(int, java.lang.String)\n", addr, size, i)
		default:
			fmt.Fprintf(&b, "0x%x %x $global::fn_%d\n", addr, size, i)
		}
		if i%50 == 0 {
			addr -= 0x1000 // code freed and reused
		}
		addr += size
	}
	return b.Bytes()
}

func BenchmarkParse(b *testing.B) {
	data := benchMap(100_000)
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		entries, errs, err := Parse(bytes.NewReader(data))
		if err != nil || len(errs) != 0 || len(entries) != 100_000 {
			b.Fatal(len(entries), errs, err)
		}
	}
}

func BenchmarkNewTable(b *testing.B) {
	entries, _, _ := Parse(bytes.NewReader(benchMap(100_000)))
	for b.Loop() {
		NewTable(entries)
	}
}

func BenchmarkLookup(b *testing.B) {
	entries, _, _ := Parse(bytes.NewReader(benchMap(100_000)))
	tab := NewTable(entries)
	lo, hi := entries[0].Start, entries[len(entries)-1].Start
	rng := rand.New(rand.NewPCG(3, 4))
	addrs := make([]uint64, 1<<16)
	for i := range addrs {
		addrs[i] = lo + rng.Uint64N(hi-lo)
	}
	i := 0
	for b.Loop() {
		if _, ok := tab.Lookup(addrs[i&(len(addrs)-1)]); !ok {
			b.Fatal("address in no function")
		}
		i++
	}
}

func BenchmarkWriter(b *testing.B) {
	entries, _, _ := Parse(bytes.NewReader(benchMap(100_000)))
	var buf bytes.Buffer
	w := NewWriter(&buf)
	i := 0
	for b.Loop() {
		if buf.Len() > 64<<20 {
			buf.Reset()
		}
		if err := w.WriteEntry(entries[i%len(entries)]); err != nil {
			b.Fatal(err)
		}
		i++
	}
}
