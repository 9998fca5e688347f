package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// TestManPages: jitprof man DIR writes one page per command help lists,
// named as man finds them (jitprof-report.1), and nothing else; each page
// says what the command's --help says, word for word: its one-line
// summary, its description (record's table of variables, with its
// <...> placeholders, included) and each flag's text. Where man is
// installed, the pages are rendered by it; else their roff is checked.
func TestManPages(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "man1")
	if code, out := jitprof(t, "man", dir); code != 0 {
		t.Fatalf("jitprof man: exit %d: %s", code, out)
	}
	var want []string
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		want = append(want, strings.ReplaceAll(c.CommandPath(), " ", "-")+".1")
		for _, sub := range c.Commands() {
			if sub.IsAvailableCommand() {
				walk(sub)
			}
		}
	}
	root := newRootCmd()
	root.InitDefaultCompletionCmd() // as Execute does
	walk(root)
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		got = append(got, e.Name())
	}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("pages %q, want %q", got, want)
	}
	for _, name := range []string{"jitprof", "jitprof-report", "jitprof-record", "jitprof-completion-bash"} {
		if !slices.Contains(got, name+".1") {
			t.Errorf("no page %s.1", name)
		}
	}

	man, err := exec.LookPath("man")
	if err != nil {
		t.Log("man is not installed: checking the pages' roff only")
	}
	var check func(c *cobra.Command)
	check = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			if sub.IsAvailableCommand() {
				check(sub)
			}
		}
		page := filepath.Join(dir, strings.ReplaceAll(c.CommandPath(), " ", "-")+".1")
		roff, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(roff, []byte(`.TH "JITPROF" "1"`)) {
			t.Errorf("%s has no .TH header for section 1:\n%.300s", page, roff)
		}
		if man == "" {
			return
		}
		cmd := exec.Command(man, "-l", page)
		// ASCII and no line breaks: the text as --help has it, bar spacing.
		cmd.Env = append(os.Environ(), "LC_ALL=C", "MANWIDTH=100000", "MANPAGER=cat", "MAN_KEEP_FORMATTING=")
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("man -l %s: %v", page, err)
		}
		text := oneSpaced(string(out))
		says := []string{c.Short, c.Long}
		c.NonInheritedFlags().VisitAll(func(f *pflag.Flag) {
			if !f.Hidden {
				_, usage := pflag.UnquoteUsage(f)
				says = append(says, "--"+f.Name, usage)
			}
		})
		for _, s := range says {
			if !strings.Contains(text, oneSpaced(s)) {
				t.Errorf("%s does not say %q; it reads:\n%s", page, oneSpaced(s), text)
			}
		}
	}
	check(root)
}

// oneSpaced is s with every run of white space one space.
func oneSpaced(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
