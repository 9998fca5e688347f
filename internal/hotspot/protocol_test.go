package hotspot

import (
	"errors"
	"strings"
	"testing"
)

func TestRequest(t *testing.T) {
	long := strings.Repeat("x", maxArgLen)
	tests := []struct {
		name    string
		command string
		args    []string
		want    string // "" if refused
	}{
		{"load", "load", []string{"/tmp/a/lib.so", "true", "dir=/d"}, "1\x00load\x00/tmp/a/lib.so\x00true\x00dir=/d\x00"},
		{"missing arguments sent empty", "properties", nil, "1\x00properties\x00\x00\x00\x00"},
		{"longest argument", "load", []string{long}, "1\x00load\x00" + long + "\x00\x00\x00"},
		{"argument too long", "load", []string{long + "x"}, ""},
		{"NUL in an argument", "load", []string{"a\x00b"}, ""},
		{"four arguments", "load", []string{"a", "b", "c", "d"}, ""},
		{"empty command", "", nil, ""},
		{"command too long", strings.Repeat("c", maxCommandLen+1), nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := request(tt.command, tt.args...)
			if tt.want == "" {
				if err == nil {
					t.Errorf("sent %q, want refused", got)
				}
				return
			}
			if err != nil || string(got) != tt.want {
				t.Errorf("got %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

func TestReplies(t *testing.T) {
	tests := []struct {
		name    string
		reply   string
		readErr string // the reply is unreadable: the error says this
		loadErr string // the load failed: the error says this
	}{
		{name: "loaded", reply: "0\nreturn code: 0\n"},
		{name: "JDK 8", reply: "0\n0\n"},
		{name: "agent failed", reply: "0\nreturn code: -3\n", loadErr: "Agent_OnAttach returned -3"},
		{name: "not loaded", reply: "-1\n/tmp/x/lib.so was not loaded.\ncannot open shared object file\n", loadErr: `status -1): "/tmp/x/lib.so was not loaded. cannot open shared object file"`},
		{name: "bad version", reply: "101\n", loadErr: "another version of the attach protocol"},
		{name: "not a return code", reply: "0\nDynamic agent loading is not enabled\n", loadErr: `not a return code: "Dynamic agent loading is not enabled"`},
		{name: "status without newline", reply: "0", loadErr: "not a return code"},
		{name: "nothing", reply: "", readErr: "without a reply"},
		{name: "status not a number", reply: "HTTP/1.1 400\n", readErr: `status "HTTP/1.1 400\n" is not a number`},
		{name: "endless status", reply: strings.Repeat("7", 2*maxReply), readErr: "is not a number"},
		{name: "long text cut", reply: "0\nreturn code: 0\n" + strings.Repeat("x", 2*maxReply), loadErr: "not a return code"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := readReply(strings.NewReader(tt.reply))
			if tt.readErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.readErr) {
					t.Fatalf("got %+v, %v; want an error saying %q", r, err, tt.readErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(r.Text) > maxReply {
				t.Errorf("read %d bytes of text, over the bound of %d", len(r.Text), maxReply)
			}
			err = loadResult(r)
			if tt.loadErr == "" {
				if err != nil {
					t.Errorf("got %v, want loaded", err)
				}
				return
			}
			var le *LoadError
			if !errors.As(err, &le) || !strings.Contains(err.Error(), tt.loadErr) {
				t.Errorf("got %v, want a LoadError saying %q", err, tt.loadErr)
			}
		})
	}
}
