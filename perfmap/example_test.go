package perfmap_test

import (
	"fmt"
	"log"
	"strings"

	"github.com/jitprof/jitprof/perfmap"
)

func ExampleTable() {
	m := "0x00007fa554ec7640 0x0000000000000130 long Work.fib(int)\n" +
		"not a line\n" +
		"7fa554ec7680 40 JS:*fib /app/fib.js:2:13\n" // reuses part of fib(int)
	entries, bad, err := perfmap.Parse(strings.NewReader(m))
	if err != nil {
		log.Fatal(err)
	}
	for _, e := range bad {
		fmt.Println(e)
	}
	tab := perfmap.NewTable(entries)
	for _, addr := range []uint64{0x7fa554ec7650, 0x7fa554ec7690, 0x7fa554ec76d0} {
		e, _ := tab.Lookup(addr)
		fmt.Printf("%#x: %s\n", addr, e.Name)
	}
	// Output:
	// perfmap: line 2: start is not a hex number: "not a line"
	// 0x7fa554ec7650: long Work.fib(int)
	// 0x7fa554ec7690: JS:*fib /app/fib.js:2:13
	// 0x7fa554ec76d0: long Work.fib(int)
}

func ExampleCreate() {
	w, err := perfmap.Create("") // /tmp/perf-<pid>.map
	if err != nil {
		log.Fatal(err)
	}
	// After generating code for a function:
	if err := w.WriteEntry(perfmap.Entry{Start: 0x7f0000001000, Size: 0x80, Name: "jit:add(int, int)"}); err != nil {
		log.Print(err)
	}
	if err := w.Close(); err != nil {
		log.Print(err)
	}
}
