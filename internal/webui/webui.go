// Package webui serves pprof's web interface (flame graph, top, graph,
// source and disassembly views) on a profile jitprof built.
//
// pprof's driver does the work; this package plugs into its hooks what a
// profile of JIT code needs. The profile is used as given: jitprof has named
// every location, so nothing is symbolized again. Disassembly, which pprof
// gets from objdump, comes from the jitdump files instead, since JIT code
// exists in no file objdump could read (internal/objtool).
//
// A JIT reuses the memory of code it dropped, so one address of a dump may
// have held several functions, and a profile's locations do not say which.
// The views take an address to be the function the dump placed there last,
// except where pprof asks for a function's exact range: that is the
// function placed last over exactly that range, listed with the names of
// the others placed there before it.
//
// The server may run as root on a shared host, and the profile's names
// are chosen by the processes recorded: it lets in only the user who
// started it (guard), and shows source files only from the directory that
// user named (sources).
//
// pprof's driver keeps the view settings of its web interface in package
// variables, so a process should serve one profile at a time.
package webui

import (
	"context"
	"errors"
	"github.com/jitprof/jitprof/internal/contract"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/google/pprof/driver"
	"github.com/google/pprof/profile"

	"github.com/jitprof/jitprof/internal/objtool"
)

// Options configures Serve.
type Options struct {
	// HostPort is where to listen, such as "localhost:8080". An empty host
	// means localhost, as for pprof -http, so that a profile is not shown to
	// the network by accident; port 0 picks a free port.
	HostPort string
	// Files holds copies of the recording's files (an archive's), or nil.
	Files *contract.Files
	// SourceDir is the directory the source views may read source files
	// from, or "": see sources.
	SourceDir string
	// OpenBrowser opens the interface in a browser, chosen as pprof does:
	// $BROWSER, else the first of chrome, chromium, firefox and others
	// that runs.
	OpenBrowser bool
	// Ready, if set, is called with the interface's URL, its token in it
	// (such as "http://localhost:8080/ui/?token=..."), once the server
	// accepts connections.
	Ready func(url string)
	// Warn, if set, is told of the source files that were not shown for
	// a reason other than their absence.
	Warn func(error)
}

// Serve serves the web interface for p until ctx is done, then shuts the
// server down and returns nil. It returns an error when it cannot listen
// or the profile is not valid. p is not changed.
//
// Only the user who started it gets in: the server answers only to the
// names of the address it serves (guard), and only to requests that bring
// the token of the URL given to Ready.
func Serve(ctx context.Context, p *profile.Profile, o Options) error {
	host, port, err := net.SplitHostPort(o.HostPort)
	if err != nil {
		return err
	}
	if host == "" {
		host = "localhost"
	}
	// Listening before the driver starts tells it the real port (given
	// port 0 it would pick one of its own), which the URL and the guard
	// need.
	ln, err := net.Listen("tcp", net.JoinHostPort(host, port))
	if err != nil {
		return err
	}
	defer ln.Close()
	addr := ln.Addr().(*net.TCPAddr)
	hostport := net.JoinHostPort(host, strconv.Itoa(addr.Port))
	g := newGuard(host, addr)
	url := "http://" + hostport + "/ui/?" + tokenParam + "=" + g.token

	src, err := newSources(o.SourceDir, o.Warn)
	if err != nil {
		return err
	}
	defer src.close()
	// A copy: the driver changes the profile it fetches, and the names of
	// source files in it are the ones sources gives.
	shown := p.Copy()
	for _, fn := range shown.Function {
		fn.Filename = src.name(fn.Filename)
	}
	obj := objtool.New(o.Files, p)
	defer obj.Close()
	return driver.PProf(&driver.Options{
		// The driver would open the browser on a URL without the token.
		Flagset: &flags{http: hostport, noBrowser: true, sourcePath: src.dir},
		Fetch:   fetcher{shown},
		Sym:     noSymbolizer{},
		Obj:     objTool{obj, src},
		UI:      silentUI{},
		HTTPServer: func(args *driver.HTTPServerArgs) error {
			g.next = handler(args.Handlers)
			return serve(ctx, ln, g, func() {
				if o.Ready != nil {
					o.Ready(url)
				}
				if o.OpenBrowser {
					openBrowser(url, src.dir, o.Warn)
				}
			})
		},
	})
}

// handler serves the driver's handlers under /ui/, as pprof does.
func handler(handlers map[string]http.Handler) http.Handler {
	ui := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// pprof's own server hands unknown paths to http.DefaultServeMux,
		// which would show whatever the process registered there.
		h, ok := handlers[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		h.ServeHTTP(w, r)
	})
	mux := http.NewServeMux()
	mux.Handle("/ui/", http.StripPrefix("/ui", ui))
	mux.Handle("/{$}", http.RedirectHandler("/ui/", http.StatusTemporaryRedirect))
	return mux
}

// serve serves h on ln until ctx is done; ready is called once it is in
// place.
func serve(ctx context.Context, ln net.Listener, h http.Handler, ready func()) error {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}

	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	ready()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	// Reports of large profiles take seconds; a request under way gets
	// that long to finish.
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		srv.Close()
	}
	if err := <-done; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// fetcher gives the driver the profile to show, whatever source it asks for.
type fetcher struct{ p *profile.Profile }

// Fetch returns no source URL: the driver would take the profile for a
// remote one and save a copy of it under $HOME/pprof.
func (f fetcher) Fetch(string, time.Duration, time.Duration) (*profile.Profile, string, error) {
	return f.p, "", nil
}

// noSymbolizer leaves the profile as jitprof named it: pprof's symbolizer
// would run addr2line or nm on the mappings' files, which know nothing of
// jitted code, and query the network for the rest.
type noSymbolizer struct{}

func (noSymbolizer) Symbolize(string, driver.MappingSources, *profile.Profile) error { return nil }

// flags is the driver's command line: only -http, -no_browser,
// -source_path and -trim_path are set, every other flag has its default.
type flags struct {
	http       string
	noBrowser  bool
	sourcePath string
}

func (f *flags) Bool(name string, def bool, _ string) *bool {
	if name == "no_browser" {
		def = f.noBrowser
	}
	return &def
}

func (f *flags) String(name, def, _ string) *string {
	switch name {
	case "http":
		def = f.http
	case "source_path":
		def = f.sourcePath
	case "trim_path":
		def = trimPath
	}
	return &def
}

func (f *flags) Int(_ string, def int, _ string) *int             { return &def }
func (f *flags) Float64(_ string, def float64, _ string) *float64 { return &def }
func (f *flags) StringList(string, string, string) *[]*string     { return new([]*string) }
func (f *flags) ExtraUsage() string                               { return "" }
func (f *flags) AddExtraUsage(string)                             {}

// Parse gives the driver one source, which fetcher ignores; the driver
// shows it nowhere.
func (f *flags) Parse(func()) []string { return []string{"jitprof"} }

// silentUI keeps the driver off the terminal. What it prints is either
// known to the caller (the URL, through Options.Ready) or shown in the
// browser: the web interface catches the errors of each report for its page.
type silentUI struct{}

func (silentUI) ReadLine(string) (string, error)     { return "", io.EOF }
func (silentUI) Print(...any)                        {}
func (silentUI) PrintErr(...any)                     {}
func (silentUI) IsTerminal() bool                    { return false }
func (silentUI) SetAutoComplete(func(string) string) {}

// WantBrowser leaves the choice to the -no_browser flag.
func (silentUI) WantBrowser() bool { return true }
