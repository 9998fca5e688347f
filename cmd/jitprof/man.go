package main

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"
	"github.com/spf13/pflag"

	"github.com/jitprof/jitprof/internal/atomicfile"
)

// newManCmd writes the manual pages, made from the commands' own help so
// that they never drift from it; make install installs them. Hidden: it is
// a build step, not something a user profiles with.
func newManCmd() *cobra.Command {
	return &cobra.Command{
		Use:    "man DIR",
		Short:  "Write a manual page per command (jitprof.1, jitprof-report.1...) into DIR",
		Args:   cobra.ExactArgs(1),
		Hidden: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := atomicfile.MkdirAll(args[0], 0o755); err != nil {
				return &exitError{code: 1, err: err}
			}
			root := cmd.Root()
			asMarkdown(root)
			// The generator's footer would date each page, so two builds
			// of one commit would differ.
			root.DisableAutoGenTag = true
			// cobra fills in the date from SOURCE_DATE_EPOCH when set,
			// for reproducible builds.
			header := &doc.GenManHeader{Title: "JITPROF", Section: "1", Source: "jitprof " + root.Version, Manual: "jitprof manual"}
			if err := writeManPages(root, header, args[0]); err != nil {
				return &exitError{code: 1, err: err}
			}
			return nil
		},
	}
}

// writeManPages writes the page of c and of each command below it that
// help lists, each whole (doc.GenManTree would leave a half-written page
// behind a failure).
func writeManPages(c *cobra.Command, header *doc.GenManHeader, dir string) error {
	for _, sub := range c.Commands() {
		if !sub.IsAvailableCommand() || sub.IsAdditionalHelpTopicCommand() {
			continue
		}
		if err := writeManPages(sub, header, dir); err != nil {
			return err
		}
	}
	h := *header // GenMan fills in the title per command
	name := strings.ReplaceAll(c.CommandPath(), " ", "-") + "." + h.Section
	return atomicfile.Shared.Write(filepath.Join(dir, name), func(w io.Writer) error {
		if err := doc.GenMan(c, &h, w); err != nil {
			return fmt.Errorf("the manual page of %s: %w", c.CommandPath(), err)
		}
		return nil
	})
}

// asMarkdown rewrites the texts of c and the commands below it as the
// Markdown the generator takes them for, so that the pages say what --help
// says: unescaped, "<jitprof's JVMTI agent>" is dropped as an HTML tag and
// "[flags] (-- COMMAND...)" a link. Indented lines (record's table
// of variables) stay as they are, in a preformatted block. It changes c:
// the man command runs once and exits.
func asMarkdown(c *cobra.Command) {
	// cobra adds " [flags]" to a use line without it.
	c.Use = strings.ReplaceAll(markdownEscaper.Replace(c.Use), `\[flags\]`, "[flags]")
	c.Long = markdownText(c.Long)
	c.Short = markdownEscaper.Replace(c.Short)
	c.NonInheritedFlags().VisitAll(func(f *pflag.Flag) {
		_, usage := pflag.UnquoteUsage(f) // help shows `NAME` as NAME
		f.Usage = markdownEscaper.Replace(usage)
		f.DefValue = markdownEscaper.Replace(f.DefValue)
	})
	for _, sub := range c.Commands() {
		asMarkdown(sub)
	}
}

// markdownEscaper escapes what Markdown would take for markup in plain text.
var markdownEscaper = strings.NewReplacer(
	`\`, `\\`, "`", "\\`", "*", `\*`, "_", `\_`, "[", `\[`, "]", `\]`,
	"<", `\<`, ">", `\>`, "&", `\&`, "#", `\#`, "|", `\|`, "~", `\~`, "(", `\(`, ")", `\)`)

// markdownText escapes a help text's lines, but for the indented ones, which
// it makes a preformatted block (four spaces, a blank line before and after).
func markdownText(text string) string {
	var b strings.Builder
	indented := false
	for line := range strings.Lines(text) {
		line = strings.TrimSuffix(line, "\n")
		isIndented := strings.HasPrefix(line, " ") || strings.HasPrefix(line, "\t")
		if isIndented != indented && strings.TrimSpace(line) != "" {
			b.WriteString("\n")
			indented = isIndented
		}
		if indented {
			b.WriteString("    " + line + "\n")
		} else {
			b.WriteString(markdownEscaper.Replace(line) + "\n")
		}
	}
	return b.String()
}
