// Command testsummary reads `go test -json` and prints what `go test`
// prints (a line per package, the output of failed tests), then one line
// "N passed, N failed, N skipped" and each skipped test with its reason, so
// that a run that tested less than it should says so. It exits 1 when a test
// or package failed.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
)

// event is one line of test2json's output.
type event struct {
	Action  string
	Package string
	Test    string
	Output  string
}

func main() {
	output := map[string][]string{} // by package and test, until it ends
	var passed, failed []string
	skipped := map[string]string{} // test: the reason it gave
	pkgFailed := false
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 1<<26)
	for in.Scan() {
		var e event
		if err := json.Unmarshal(in.Bytes(), &e); err != nil {
			fmt.Println(in.Text()) // not an event: go test's own message
			continue
		}
		key := e.Package + " " + e.Test
		switch e.Action {
		case "build-output":
			fmt.Print(e.Output)
		case "output":
			if e.Test == "" {
				if e.Output != "PASS\n" { // go test prints the package's ok line without it
					fmt.Print(e.Output)
				}
			} else {
				output[key] = append(output[key], e.Output)
			}
		case "pass":
			if e.Test != "" {
				passed = append(passed, key)
			}
			delete(output, key)
		case "skip":
			if e.Test != "" {
				skipped[key] = reason(output[key])
			}
			delete(output, key)
		case "fail":
			if e.Test == "" {
				pkgFailed = true
				continue
			}
			failed = append(failed, key)
			fmt.Print(strings.Join(output[key], ""))
			delete(output, key)
		}
	}
	if err := in.Err(); err != nil {
		fmt.Fprintln(os.Stderr, "testsummary:", err)
		os.Exit(2)
	}
	fmt.Printf("%d passed, %d failed, %d skipped\n", len(passed), len(failed), len(skipped))
	for _, key := range slices.Sorted(maps.Keys(skipped)) {
		fmt.Printf("  skipped %s: %s\n", key, skipped[key])
	}
	if len(failed) > 0 || pkgFailed {
		os.Exit(1)
	}
}

// reason is the message a skipped test gave: its last line of output that
// is not the "--- SKIP" line itself.
func reason(lines []string) string {
	for _, l := range slices.Backward(lines) {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "--- SKIP") && !strings.HasPrefix(l, "=== ") {
			return l
		}
	}
	return "(no reason given)"
}
