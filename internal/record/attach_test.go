package record

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jitprof/jitprof/internal/fixtures"
	"github.com/jitprof/jitprof/internal/procfs"
	"github.com/jitprof/jitprof/perfdata"
)

// TestMmap2Name: of the kernel's records, only an MMAP2 of a file named
// libjvm.so (deleted since, or not) is taken for a JVM, with its pid.
func TestMmap2Name(t *testing.T) {
	attr := &perfdata.Attr{SampleType: perfdata.SampleTID | perfdata.SampleTime, Flags: perfdata.AttrSampleIDAll}
	mmap2 := func(name string) []byte {
		b, err := perfdata.AppendRecord(nil, &perfdata.Mmap2{RecordHeader: perfdata.RecordHeader{Type: perfdata.TypeMmap2, Attr: attr},
			Pid: 4242, Tid: 4243, Addr: 0x7f0000000000, Len: 0x1000, Prot: 5, Filename: name, Trailer: perfdata.Trailer{Pid: 4242, Tid: 4243, Time: 7}})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	comm, err := perfdata.AppendRecord(nil, &perfdata.Comm{RecordHeader: perfdata.RecordHeader{Type: perfdata.TypeComm, Attr: attr},
		Pid: 4242, Tid: 4242, Comm: "libjvm.so"})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		rec  []byte
		want bool
	}{
		{"HotSpot", mmap2("/usr/lib/jvm/java-17-openjdk-amd64/lib/server/libjvm.so"), true},
		{"deleted since", mmap2("/opt/jdk/lib/server/libjvm.so (deleted)"), true},
		{"another library", mmap2("/usr/lib/x86_64-linux-gnu/libc.so.6"), false},
		{"a name ending like it", mmap2("/opt/x/notlibjvm.so"), false},
		{"libjvm.so as a directory", mmap2("/opt/libjvm.so/lib.so"), false},
		{"a jitdump marker", mmap2("/tmp/jit-4242.dump"), false},
		{"a COMM record", comm, false},
		{"cut short", mmap2("/opt/jdk/lib/server/libjvm.so")[:60], false},
		{"empty", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pid, name, ok := mmap2Name(tt.rec)
			if ok = ok && isLibJVM(string(name)); ok != tt.want || ok && pid != 4242 {
				t.Errorf("got pid %d, %v; want %v", pid, ok, tt.want)
			}
		})
	}
}

// workClasses compiles testdata/workloads/Work.java (a recursive fib and
// string building, for the milliseconds its argument says) into a
// directory of the test's.
func workClasses(t *testing.T) string {
	t.Helper()
	javac := fixtures.LookPath(t, "javac")
	dir := t.TempDir()
	if out, err := exec.Command(javac, "-d", dir, fixtures.Workload(t, "Work.java")).CombinedOutput(); err != nil {
		t.Fatalf("javac: %v\n%s", err, out)
	}
	// The agent is one `make agents` built for the tests, found by
	// agents.Library.
	t.Setenv("JITPROF_AGENT_DIR", fixtures.Agents(t))
	return dir
}

// javaHome makes a home directory for a JVM cmd will run, where the
// attached agent writes its dump (~/.debug/jit/...), removed with the
// test's files, and returns it.
func javaHome(t *testing.T, cmd *exec.Cmd) string {
	home := t.TempDir()
	cmd.Env = append(os.Environ(), "HOME="+home)
	return home
}

// dumpIn checks that the dump of JVM pid is in home's .debug/jit, where
// the agent writes it when given no directory.
func dumpIn(t *testing.T, home string, pid int) {
	t.Helper()
	dumps, err := filepath.Glob(filepath.Join(home, ".debug", "jit", "*", fmt.Sprintf("jit-%d.dump", pid)))
	if err != nil || len(dumps) != 1 {
		t.Errorf("the JVM's dumps in %s/.debug/jit: %q (%v), want one", home, dumps, err)
	}
}

// startJava runs argv (java's arguments) with no profiling flag, in a home
// of the test's and with env added to its environment, killed when the
// test ends; stdout gets what the JVM prints. It returns the JVM's home.
func startJava(t *testing.T, stdout *strings.Builder, env []string, argv ...string) (*exec.Cmd, string) {
	t.Helper()
	cmd := exec.Command(fixtures.LookPath(t, "java"), argv...)
	home := javaHome(t, cmd)
	cmd.Env = append(cmd.Env, env...)
	cmd.Stdout, cmd.Stderr = stdout, testWriter{t}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-done
	})
	return cmd, home
}

// workShare returns the share of process pid's samples whose leaf is one
// of Work's methods, and how many samples it has.
func workShare(t *testing.T, data string, pid int) (float64, int) {
	t.Helper()
	var work, all int
	for _, s := range analyzeRecording(t, data).Profile.PProf().Sample {
		if p := s.NumLabel["pid"]; len(p) != 1 || p[0] != int64(pid) {
			continue
		}
		all += int(s.Value[0])
		if l := s.Location[0].Line; len(l) > 0 && strings.HasPrefix(l[len(l)-1].Function.Name, "Work.") {
			work += int(s.Value[0])
		}
	}
	if all == 0 {
		t.Fatalf("%s: no samples of the JVM, pid %d", data, pid)
	}
	return float64(work) / float64(all), all
}

// TestAttachJava: a JVM started without any flag, recorded with -p, has
// none of its samples named as Work's methods without attaching, and
// most of them once recorded again with AttachJava, which loads the agent
// once (in the recording's first second, or two on a loaded machine,
// whose samples stay unnamed): a third recording finds the JVM writing a dump already. The dump
// is in the JVM's home, ~/.debug/jit, found by the report from its marker,
// mapped when the agent was loaded. The JVM printed no thread dump: its
// SIGQUIT was taken for the attach.
func TestAttachJava(t *testing.T) {
	classes := workClasses(t)
	var stdout strings.Builder
	jvm, home := startJava(t, &stdout, nil, "-cp", classes, "Work", "60000")
	pid := jvm.Process.Pid
	fixtures.WaitCPU(t, pid, time.Second) // the JVM compiles its workload meanwhile
	dir := t.TempDir()
	var shares []float64
	for i, tt := range []struct {
		attach bool
		want   AttachStats
	}{
		{false, AttachStats{}},
		{true, AttachStats{Attached: 1}},
		{true, AttachStats{Already: 1}},
	} {
		data := filepath.Join(dir, fmt.Sprintf("%d.data", i))
		res, _ := record(t, Options{Output: data, Pids: []int{pid}, Duration: 4 * time.Second, AttachJava: tt.attach})
		if res.Java != tt.want {
			t.Errorf("recording %d (AttachJava %v): %+v, want %+v", i, tt.attach, res.Java, tt.want)
		}
		share, n := workShare(t, data, pid)
		t.Logf("recording %d (AttachJava %v): %.3f of the JVM's %d samples named as Work's methods", i, tt.attach, share, n)
		shares = append(shares, share)
	}
	if shares[0] != 0 {
		t.Errorf("without attaching, %.3f of the samples are named as Work's methods: the JVM wrote a dump already", shares[0])
	}
	for i, share := range shares[1:] {
		if share < 0.5 {
			t.Errorf("recording %d: only %.3f of the JVM's samples are named as Work's methods", i+1, share)
		}
	}
	dumpIn(t, home, pid)
	if strings.Contains(stdout.String(), "Full thread dump") {
		t.Errorf("the JVM printed a thread dump: the SIGQUIT was not taken for an attach\n%s", stdout.String())
	}
}

// TestAttachJavaStarted: a JVM started during the recording, a child of
// the process recorded, is attached once it maps libjvm.so, as the kernel
// reports it, and its methods are named.
func TestAttachJavaStarted(t *testing.T) {
	classes := workClasses(t)
	java := fixtures.LookPath(t, "java")
	// The shell is recorded; the JVM is the child it starts once told
	// to, while the recording runs.
	sh := exec.Command("/bin/sh", "-c", `read -r _; "$0" -cp "$1" Work 5000 >/dev/null`, java, classes)
	stdin, err := sh.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	sh.Stderr = testWriter{t}
	home := javaHome(t, sh)
	if err := sh.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sh.Process.Kill(); sh.Wait() })
	time.AfterFunc(300*time.Millisecond, func() { stdin.Write([]byte("\n")) })
	data := filepath.Join(t.TempDir(), "perf.data")
	res, _ := record(t, Options{Output: data, Pids: []int{sh.Process.Pid}, AttachJava: true})
	if want := (AttachStats{Attached: 1}); res.Java != want {
		t.Errorf("%+v, want %+v", res.Java, want)
	}
	var jvm int
	for _, s := range analyzeRecording(t, data).Profile.PProf().Sample {
		if c := s.Label["comm"]; len(c) == 1 && c[0] == "java" {
			jvm = int(s.NumLabel["pid"][0])
		}
	}
	if jvm == 0 || jvm == sh.Process.Pid {
		t.Fatalf("no samples of the JVM, the shell's child")
	}
	dumpIn(t, home, jvm)
	share, n := workShare(t, data, jvm)
	t.Logf("%.3f of the JVM's %d samples named as Work's methods", share, n)
	if share < 0.5 {
		t.Errorf("only %.3f of the JVM's samples are named as Work's methods", share)
	}
}

// TestAttachJavaRefused: a JVM run with -XX:+DisableAttachMechanism is
// counted refused once the attach's wait ends, and a wait longer than the
// recording is cut short by its end, counted unfinished: the recording is
// not held by the wait either way. A JVM whose HOME does not exist is counted
// refused at once, the agent not loaded into it.
func TestAttachJavaRefused(t *testing.T) {
	classes := workClasses(t)
	var stdout strings.Builder
	disabled, _ := startJava(t, &stdout, nil, "-XX:+DisableAttachMechanism", "-cp", classes, "Work", "60000")
	fixtures.WaitCPU(t, disabled.Process.Pid, time.Second)
	homeless, _ := startJava(t, &stdout, []string{"HOME=/nonexistent"}, "-cp", classes, "Work", "60000")
	for _, tt := range []struct {
		name     string
		jvm      *exec.Cmd
		timeout  time.Duration
		duration time.Duration
		want     AttachStats
	}{
		// 4 s: the attach's half-second wait begins once the JVM's maps
		// are read and its /tmp opened, which under go test -p 4 beside
		// two busy loops ran past a 2 s recording's end once.
		{"refused in time", disabled, 500 * time.Millisecond, 4 * time.Second, AttachStats{Refused: 1}},
		{"cut short", disabled, time.Minute, 2 * time.Second, AttachStats{Unfinished: 1}},
		{"no home", homeless, time.Minute, time.Second, AttachStats{Refused: 1}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			o := Options{Pids: []int{tt.jvm.Process.Pid}, Duration: tt.duration, AttachJava: true, AttachTimeout: tt.timeout}
			res, _ := recordUntil(context.Background(), t, o)
			if res.Java != tt.want {
				t.Errorf("%+v, want %+v", res.Java, tt.want)
			}
			// Held by a wait for the attach, the recording would end with
			// the attach's timeout, a minute; its end takes a little longer
			// than its duration, and seconds longer under a suite's load
			// (1.3 s once: a bound of half its 1 s duration failed there).
			// A wait shorter than the recording holds nothing.
			if over := res.Elapsed - tt.duration; tt.timeout > tt.duration && over > tt.timeout/10 {
				t.Errorf("the recording took %v past its duration: held by the attach's wait of up to %v", over.Round(time.Millisecond), tt.timeout)
			}
			if maps, err := os.ReadFile(procfs.Host.Path(uint32(tt.jvm.Process.Pid), "maps")); err != nil || strings.Contains(string(maps), "libjitprof-jvmti") {
				t.Errorf("the JVM maps jitprof's agent (%v)", err)
			}
		})
	}
}

// TestDumpPlace: a JVM is attached only where the agent, given no
// directory, has one for its dump: JITDUMPDIR in its environment, or a
// HOME that is a directory of its user (through a symlink too, resolved
// in its root); not a HOME missing, someone else's, or none.
func TestDumpPlace(t *testing.T) {
	dir := t.TempDir()
	home := filepath.Join(dir, "home")
	others := filepath.Join(dir, "others")
	for _, d := range []string{home, others} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chown(others, os.Getuid()+1, os.Getgid()); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(home, filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		env  []string
		want string // the error says; "" for none
	}{
		{"its home", []string{"HOME=" + home}, ""},
		{"through a symlink", []string{"HOME=" + filepath.Join(dir, "link")}, ""},
		{"JITDUMPDIR", []string{"JITDUMPDIR=/nowhere", "HOME=/nonexistent"}, ""},
		{"an empty JITDUMPDIR", []string{"JITDUMPDIR=", "HOME=/nonexistent"}, "no such file"},
		{"no home", []string{"HOME=/nonexistent"}, "no such file"},
		{"another user's home", []string{"HOME=" + others}, "not its user's"},
		{"a relative home", []string{"HOME=home"}, "neither a HOME"},
		{"no HOME", []string{"PATH=/bin"}, "neither a HOME"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := exec.Command("/bin/sleep", "60")
			cmd.Env = tt.env
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() { cmd.Process.Kill(); cmd.Wait() }()
			// Start returns once the child is past the point of no return
			// of its exec, which can be before the kernel has laid out its
			// new environment: an empty environ until then.
			for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(time.Millisecond) {
				if b, _ := os.ReadFile(procfs.Host.Path(uint32(cmd.Process.Pid), "environ")); len(b) > 0 {
					break
				}
			}
			err := dumpPlace(procfs.Host, uint32(cmd.Process.Pid))
			if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
				t.Errorf("got %v, want %q", err, tt.want)
			}
		})
	}
}

// TestWriteLostMarkers: a JVM the agent was loaded into whose marker
// mapping the recording lacks (the kernel lost it) gets it written from
// its maps, at the time of the load; one whose marker the recording holds
// gets nothing more; one that exited is said to stay unnamed.
func TestWriteLostMarkers(t *testing.T) {
	const lost, held, gone = 4242, 4343, 4444
	marker := "/home/u/.debug/jit/jitprof-jvmti-jit-20261127.x/jit-4242.dump"
	proc := fixtures.ProcWithMaps(t, map[uint32]string{
		lost: "7fad97a1e000-7fad97a1f000 r-xp 00000000 fe:00 10428402                   " + marker + "\n" +
			"7fad97a20000-7fad97a30000 r-xp 00000000 fe:00 10428403                   /usr/lib/jvm/lib/server/libjvm.so\n",
		held: "7fad97a1e000-7fad97a1f000 r-xp 00000000 fe:00 10428404                   /tmp/jit-4343.dump\n",
	})
	var notes []string
	attr := newAttr(Event{Name: "cpu-clock"}, attrConfig{freq: 1})
	data := filepath.Join(t.TempDir(), "perf.data")
	w, err := perfdata.Create(data, perfdata.Options{Attrs: []*perfdata.Attr{attr}})
	if err != nil {
		t.Fatal(err)
	}
	s := &session{o: Options{Proc: proc, Note: func(n string) { notes = append(notes, n) }}, attr: attr, w: w, marked: map[uint32]bool{held: true}}
	if err := s.writeLostMarkers(map[uint32]uint64{lost: 1000, held: 2000, gone: 3000}); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, rec := range fixtures.Records(t, data) {
		if m, ok := rec.(*perfdata.Mmap2); ok {
			got = append(got, fmt.Sprintf("%d/%d %#x+%#x %s at %d", m.Pid, m.Tid, m.Addr, m.Len, m.Filename, m.Trailer.Time))
		}
	}
	want := []string{fmt.Sprintf("4242/4242 0x7fad97a1e000+0x1000 %s at 1000", marker)}
	if !slices.Equal(got, want) {
		t.Errorf("mappings written %q, want %q", got, want)
	}
	if len(notes) != 2 || !strings.Contains(notes[0], "JVM 4242: the recording lacked its jitdump's marker") || !strings.Contains(notes[1], "JVM 4444") || !strings.Contains(notes[1], "exited") {
		t.Errorf("notes %q", notes)
	}
}
