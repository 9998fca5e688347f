package webui

import (
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"
)

// guarded returns g serving "inside" to whoever it lets through.
func guarded(host string, addr *net.TCPAddr) *guard {
	g := newGuard(host, addr)
	g.next = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("inside")) })
	return g
}

// try sends g a GET of target with the Host header host and the cookies,
// and returns the response.
func try(g *guard, host, target string, cookies ...*http.Cookie) *http.Response {
	r := httptest.NewRequest(http.MethodGet, target, nil)
	r.Host = host
	for _, c := range cookies {
		r.AddCookie(c)
	}
	w := httptest.NewRecorder()
	g.ServeHTTP(w, r)
	return w.Result()
}

func TestGuardHost(t *testing.T) {
	loopback := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8080}
	loopback6 := &net.TCPAddr{IP: net.IPv6loopback, Port: 8080}
	any4 := &net.TCPAddr{IP: net.IPv4zero, Port: 8080}
	lan := &net.TCPAddr{IP: net.IPv4(192, 0, 2, 7), Port: 8080}
	for _, c := range []struct {
		given string // the host given to --http
		addr  *net.TCPAddr
		hosts map[string]bool // Host headers, and whether they get in
	}{
		{"localhost", loopback, map[string]bool{
			"localhost:8080": true, "LocalHost:8080": true, "localhost.:8080": true,
			"127.0.0.1:8080": true, "[::1]:8080": true, "[0:0:0:0:0:0:0:1]:8080": true, "[::ffff:127.0.0.1]:8080": true,
			"localhost": false, "localhost:80": false, "localhost:8081": false,
			"evil.example:8080": false, "rebind.evil.example:8080": false, "localhost.evil.example:8080": false,
			"127.0.0.2:8080": false, "192.0.2.7:8080": false, "": false, "foo.localhost:8080": false,
		}},
		{"127.0.0.1", loopback, map[string]bool{"127.0.0.1:8080": true, "localhost:8080": true, "evil.example:8080": false}},
		{"::1", loopback6, map[string]bool{"[::1]:8080": true, "localhost:8080": true, "evil.example:8080": false}},
		{"devbox.example", lan, map[string]bool{
			"devbox.example:8080": true, "DEVBOX.example.:8080": true, "192.0.2.7:8080": true,
			"localhost:8080": false, "127.0.0.1:8080": false, "evil.example:8080": false, "devbox.example:8081": false,
		}},
		{"0.0.0.0", any4, map[string]bool{"0.0.0.0:8080": true, "localhost:8080": true, "127.0.0.1:8080": true, "evil.example:8080": false}},
	} {
		g := guarded(c.given, c.addr)
		for host, ok := range c.hosts {
			resp := try(g, host, "/ui/?"+tokenParam+"="+g.token)
			body := readBody(t, resp)
			switch {
			case ok && resp.StatusCode != http.StatusOK:
				t.Errorf("--http %s (%s): Host %q refused: %d %s", c.given, c.addr, host, resp.StatusCode, body)
			case !ok && (resp.StatusCode != http.StatusMisdirectedRequest || strings.Contains(body, "inside")):
				t.Errorf("--http %s (%s): Host %q got %d %q, want 421", c.given, c.addr, host, resp.StatusCode, body)
			case !ok && !strings.Contains(body, "DNS rebinding"):
				t.Errorf("Host %q: the refusal does not say why: %q", host, body)
			}
		}
	}
}

func TestGuardToken(t *testing.T) {
	addr := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8080}
	g := guarded("localhost", addr)
	other := newGuard("localhost", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8081})
	if len(g.token) < 26 || g.token == other.token { // 26 base32 digits: 130 bits
		t.Fatalf("tokens %q and %q: want two different ones of at least 128 bits", g.token, other.token)
	}
	wrong := []byte(g.token)
	wrong[len(wrong)-1] ^= 1 // same length, last digit off
	cookie := func(name, value string) *http.Cookie { return &http.Cookie{Name: name, Value: value} }
	for _, c := range []struct {
		name    string
		target  string
		cookies []*http.Cookie
		in      bool
	}{
		{"no token", "/ui/flamegraph", nil, false},
		{"token in URL", "/ui/flamegraph?" + tokenParam + "=" + g.token, nil, true},
		{"token among other params", "/ui/source?f=x&" + tokenParam + "=" + g.token + "&si=cpu", nil, true},
		{"token in cookie", "/ui/top", []*http.Cookie{cookie(g.cookie, g.token)}, true},
		{"wrong token in URL", "/ui/?" + tokenParam + "=" + string(wrong), nil, false},
		{"token's prefix", "/ui/?" + tokenParam + "=" + g.token[:len(g.token)-1], nil, false},
		{"token and more", "/ui/?" + tokenParam + "=" + g.token + "0", nil, false},
		{"empty token", "/ui/?" + tokenParam + "=", nil, false},
		{"wrong token in cookie", "/ui/", []*http.Cookie{cookie(g.cookie, string(wrong))}, false},
		{"another port's cookie", "/ui/", []*http.Cookie{cookie(other.cookie, g.token)}, false},
		{"another server's token", "/ui/?" + tokenParam + "=" + other.token, nil, false},
		{"token as another param", "/ui/?f=" + g.token, nil, false},
	} {
		resp := try(g, "localhost:8080", c.target, c.cookies...)
		body := readBody(t, resp)
		if got := resp.StatusCode == http.StatusOK && body == "inside"; got != c.in {
			t.Errorf("%s: %d %q, let in %v, want %v", c.name, resp.StatusCode, body, got, c.in)
		}
		if !c.in && (resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "token")) {
			t.Errorf("%s: %d %q, want 403 saying a token is missing", c.name, resp.StatusCode, body)
		}
		if got := resp.Header.Get("Referrer-Policy"); got != "no-referrer" {
			t.Errorf("%s: Referrer-Policy %q, want no-referrer", c.name, got)
		}
		set := resp.Cookies()
		fromURL := c.in && len(c.cookies) == 0
		switch {
		case !fromURL && len(set) > 0:
			t.Errorf("%s: cookies set: %v", c.name, set)
		case fromURL && (len(set) != 1 || set[0].Name != g.cookie || set[0].Value != g.token || !set[0].HttpOnly ||
			set[0].SameSite != http.SameSiteStrictMode || set[0].Path != "/"):
			t.Errorf("%s: cookies set: %v, want %s=token; Path=/; HttpOnly; SameSite=Strict", c.name, set, g.cookie)
		}
	}
}

func readBody(t *testing.T, resp *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestServeGuarded: Serve listens on loopback when given no host, and
// lets in only requests that name it and bring the token, or the cookie
// the token's first request set, with which the interface's own links work.
func TestServeGuarded(t *testing.T) {
	p := sourceProfile(t, []sourceCase{{fn: "JS:*work", file: "work.js", line: 1}}, "", "")
	srv := serveTest(t, p, Options{HostPort: ":0"})
	u, err := url.Parse(srv.base)
	if err != nil {
		t.Fatal(err)
	}
	if u.Hostname() != "localhost" {
		t.Errorf("Serve on :0 gave the URL %s, want localhost", srv.base)
	}
	if code, body := fetch(t, srv.base+"/ui/top"); code != http.StatusForbidden {
		t.Errorf("no token: %d, want 403:\n%s", code, body)
	}
	// Another local address of the host: not served.
	if addrs, err := net.InterfaceAddrs(); err == nil {
		for _, a := range addrs {
			if ipnet, ok := a.(*net.IPNet); ok && !ipnet.IP.IsLoopback() && ipnet.IP.To4() != nil {
				if c, err := net.DialTimeout("tcp", net.JoinHostPort(ipnet.IP.String(), u.Port()), 5*time.Second); err == nil {
					c.Close()
					t.Errorf("Serve on :0 answers on %s", ipnet.IP)
				}
				break
			}
		}
	}

	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Jar: jar}
	for _, c := range []struct {
		name, url, host string
		want            int
	}{
		{"token", srv.at("/ui/"), "", http.StatusOK},
		{"cookie", srv.base + "/ui/top", "", http.StatusOK},
		{"cookie, source view", srv.base + "/ui/source?f=work", "", http.StatusOK},
		{"rebound name", srv.base + "/ui/top", "rebind.evil.example:" + u.Port(), http.StatusMisdirectedRequest},
		{"rebound name with the token", srv.at("/ui/top"), "rebind.evil.example:" + u.Port(), http.StatusMisdirectedRequest},
	} {
		req, err := http.NewRequest(http.MethodGet, c.url, nil)
		if err != nil {
			t.Fatal(err)
		}
		if c.host != "" {
			req.Host = c.host
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body := readBody(t, resp)
		if resp.StatusCode != c.want {
			t.Errorf("%s: GET %s (Host %q): %s, want %d:\n%s", c.name, c.url, c.host, resp.Status, c.want, body)
		}
	}
}
