package webui

import (
	"fmt"
	"html/template"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// openPage sends the browser on to the interface's URL: by script while the
// page is parsed, before it has loaded (a headless browser's --dump-dom
// could otherwise take this page, a meta refresh being a navigation after
// the load), by the refresh where scripts are off, by the link by hand.
var openPage = template.Must(template.New("open").Parse(
	`<!DOCTYPE html><script>location.replace({{.}})</script><meta http-equiv="refresh" content="0; url={{.}}"><title>jitprof</title><a href="{{.}}">jitprof</a>` + "\n"))

// openBrowser opens url in the browser pprof would choose: $BROWSER, else
// the first of chrome, google-chrome, chromium, firefox, sensible-browser
// and (on a desktop) xdg-open that starts. pprof's own would give the
// browser the URL on its command line, where any local user reads the
// token (ps, /proc/PID/cmdline); it gets a page in dir, private to the
// user, that sends it on.
func openBrowser(url, dir string, warn func(error)) {
	page := filepath.Join(dir, ownDir, "open.html")
	f, err := os.OpenFile(page, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err == nil {
		err = openPage.Execute(f, url)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		if warn != nil {
			warn(fmt.Errorf("no browser opened: %w", err))
		}
		return
	}
	cmds := []string{"chrome", "google-chrome", "chromium", "firefox", "sensible-browser"}
	if b := os.Getenv("BROWSER"); b != "" {
		cmds = append([]string{b}, cmds...)
	}
	if os.Getenv("DISPLAY") != "" {
		cmds = append(cmds, "xdg-open")
	}
	for _, c := range cmds {
		args := strings.Fields(c)
		cmd := exec.Command(args[0], append(args[1:], "file://"+page)...)
		cmd.Stderr = os.Stderr
		if cmd.Start() == nil {
			go cmd.Wait()
			return
		}
	}
	if warn != nil {
		warn(fmt.Errorf("no browser started (set $BROWSER): open the URL above"))
	}
}
