package webui

import (
	"crypto/rand"
	"crypto/subtle"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
)

// tokenParam is the URL parameter that carries the token.
const tokenParam = "token"

// guard lets through the requests of the user who started the server, and
// no one else's. The web interface shows what a profile holds, the names
// and code of every process recorded, so on a shared host it must not be
// open to other local users, who can reach any port on loopback, nor to
// the pages of other sites in the user's own browser:
//
//   - A request must bring the token of the URL the server printed, 128
//     random bits, in that URL's parameter or in the cookie the first such
//     request sets (HttpOnly, SameSite=Strict, so that no page of another
//     site can read it or make the browser send it), which lets the
//     interface's own links work without it.
//   - A request must name the server in its Host header by the address it
//     serves, or by localhost where that is loopback: a page of another
//     site that made its name resolve to 127.0.0.1 (DNS rebinding) names
//     its own site, and is refused before the token is even looked at.
type guard struct {
	// hosts are the Host headers the server answers to, as canonicalHost
	// writes them.
	hosts []string
	port  string
	token string
	// cookie is the name of the token's cookie: one per port, since the
	// browser sends a host's cookies to all of its ports, and two servers
	// on one host would otherwise take each other's.
	cookie string
	next   http.Handler
}

// newGuard returns the guard of a server started for host (as the user
// gave it) that listens on addr, with a new token.
func newGuard(host string, addr *net.TCPAddr) *guard {
	port := strconv.Itoa(addr.Port)
	g := &guard{port: port, token: rand.Text(), cookie: "jitprof-token-" + port}
	names := []string{host}
	if ip, ok := netip.AddrFromSlice(addr.IP); ok {
		names = append(names, ip.Unmap().String())
	}
	switch {
	case addr.IP.IsLoopback():
		names = append(names, "localhost", "127.0.0.1", "::1")
	case addr.IP.IsUnspecified():
		// Every address of the host reaches the server, and so does its
		// name. Addresses are not names a DNS rebinding can use.
		names = append(names, "localhost", "127.0.0.1", "::1")
		if name, err := os.Hostname(); err == nil {
			names = append(names, name)
		}
		if addrs, err := net.InterfaceAddrs(); err == nil {
			for _, a := range addrs {
				if p, err := netip.ParsePrefix(a.String()); err == nil {
					names = append(names, p.Addr().Unmap().String())
				}
			}
		}
	}
	for _, name := range names {
		h := canonicalHost(net.JoinHostPort(name, port))
		if !slices.Contains(g.hosts, h) {
			g.hosts = append(g.hosts, h)
		}
	}
	return g
}

// canonicalHost writes a Host header one way: lower case, an address as
// netip writes it, no dot at the end of a name, the port always there.
func canonicalHost(hostport string) string {
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		host, port = hostport, "80"
	}
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if ip, err := netip.ParseAddr(host); err == nil {
		host = ip.Unmap().String()
	}
	return net.JoinHostPort(host, port)
}

func (g *guard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// The token is in the first page's URL: its links must not send it to
	// other sites.
	w.Header().Set("Referrer-Policy", "no-referrer")
	if !slices.Contains(g.hosts, canonicalHost(r.Host)) {
		http.Error(w, fmt.Sprintf("jitprof: refused: this server answers to %s, not to %q, the name the request gave it "+
			"(a page of another site would give its own, as in DNS rebinding); "+
			"to serve under another name, give it to --http as NAME:PORT", strings.Join(g.hosts, ", "), r.Host),
			http.StatusMisdirectedRequest)
		return
	}
	if c, err := r.Cookie(g.cookie); err == nil && g.valid(c.Value) {
		g.next.ServeHTTP(w, r)
		return
	}
	if g.valid(r.URL.Query().Get(tokenParam)) {
		// The page is served at once rather than redirected to a URL
		// without the token: a SameSite=Strict cookie is not sent along
		// a redirect of a navigation another site (or a file) started.
		http.SetCookie(w, &http.Cookie{Name: g.cookie, Value: g.token, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
		g.next.ServeHTTP(w, r)
		return
	}
	http.Error(w, "jitprof: refused: no valid token; open the URL with ?"+tokenParam+"= that jitprof report --http printed when it started",
		http.StatusForbidden)
}

// valid tells whether s is the token, in a time that does not depend on
// how much of it matches.
func (g *guard) valid(s string) bool {
	return subtle.ConstantTimeCompare([]byte(s), []byte(g.token)) == 1
}
