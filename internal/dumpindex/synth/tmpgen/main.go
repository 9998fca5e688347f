package main

import (
	"flag"
	"log"

	"github.com/jitprof/jitprof/internal/dumpindex/synth"
)

func main() {
	n := flag.Int("n", 1000, "")
	s := flag.Int("s", 0, "")
	d := flag.Int("d", 0, "")
	dir := flag.String("o", ".", "")
	flag.Parse()
	if *s == 0 {
		*s = *n
	}
	if _, err := synth.Write(*dir, synth.Options{Functions: *n, Samples: *s, Depth: *d}); err != nil {
		log.Fatal(err)
	}
}
