package hotspot

import (
	"bytes"
	"errors"
	"strconv"
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

// FuzzReply: a listener's answer is any bytes (the socket may be another
// program's); it is read as the status line and the text after it, at most
// maxReply bytes of it, or refused, and what is said of it stays short:
// the 200 bytes truncate quotes, each at most 4 once quoted, and words.
func FuzzReply(f *testing.F) {
	for _, s := range []string{"0\nreturn code: 0\n", "0\n0\n", "0\nreturn code: -3\n", "-1\n/tmp/x/lib.so was not loaded.\n",
		"101\n", "0\nDynamic agent loading is not enabled\n", "0", "", "HTTP/1.1 400\n"} {
		f.Add([]byte(s))
	}
	const maxMessage = 100 + 4*200
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := readReply(bytes.NewReader(b))
		if err != nil {
			if len(err.Error()) > maxMessage {
				t.Fatalf("an error of %d bytes: %.300s...", len(err.Error()), err)
			}
			return
		}
		head := b[:min(len(b), maxReply)]
		line, text, _ := bytes.Cut(head, []byte{'\n'})
		if status, _ := strconv.Atoi(string(line)); status != r.Status || r.Text != string(text) {
			t.Fatalf("%q read as status %d and text %q", b, r.Status, r.Text)
		}
		err = loadResult(r)
		if err == nil && (r.Status != 0 || !strings.HasSuffix(strings.TrimSpace(r.Text), "0")) {
			t.Fatalf("%+v taken for a load", r)
		}
		if err != nil && len(err.Error()) > maxMessage {
			t.Fatalf("an error of %d bytes: %.300s...", len(err.Error()), err)
		}
	})
}

// FuzzCatchesQuit: a /proc/PID/status of any bytes (a process's name is
// in it) tells whether SIGQUIT is caught and not ignored by its SigCgt and
// SigIgn lines, or is refused.
func FuzzCatchesQuit(f *testing.F) {
	f.Add([]byte("Name:\tjava\nSigBlk:\t0000000000000000\nSigIgn:\t0000000000000000\nSigCgt:\t2000000181005ccf\n"))
	f.Add([]byte("SigIgn:\t0000000000000004\nSigCgt:\t0000000000000004\n"))
	f.Add([]byte("Name:\tSigCgt: 4\nSigIgn:\t0\n"))
	f.Fuzz(func(t *testing.T, status []byte) {
		caught, err := catchesQuit(status)
		if err != nil {
			return
		}
		masks := map[string]uint64{}
		for line := range strings.Lines(string(status)) {
			key, value, _ := strings.Cut(line, ":")
			if key == "SigCgt" || key == "SigIgn" {
				masks[key], _ = strconv.ParseUint(strings.TrimSpace(value), 16, 64)
			}
		}
		const quit = 1 << 2
		if want := masks["SigCgt"]&quit != 0 && masks["SigIgn"]&quit == 0; caught != want {
			t.Fatalf("%q: caught %v, the masks say %v", status, caught, want)
		}
	})
}
