package agents

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jitprof/jitprof/internal/fixtures"
)

// TestExtractDirs: root never extracts where its environment says (under
// sudo -E, HOME and XDG_CACHE_HOME are another user's); a user's own
// directories come from theirs.
func TestExtractDirs(t *testing.T) {
	tests := []struct {
		name                 string
		root                 bool
		home, cache, runtime string
		want                 []string
	}{
		{name: "root under sudo -E", root: true, home: "/home/eve", cache: "/home/eve/.cache", runtime: "/run/user/1000",
			want: []string{"/run/jitprof", "/var/cache/jitprof"}},
		{name: "root", root: true, home: "/root",
			want: []string{"/run/jitprof", "/var/cache/jitprof"}},
		{name: "user", home: "/home/al", runtime: "/run/user/1000",
			want: []string{"/run/user/1000/jitprof", "/home/al/.cache/jitprof"}},
		{name: "user with a cache home", home: "/home/al", cache: "/var/al",
			want: []string{"/var/al/jitprof"}},
		{name: "relative variables are no directory", home: "/home/al", cache: "rel", runtime: "rel"}, // os.UserCacheDir: an error
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("HOME", tt.home)
			t.Setenv("XDG_CACHE_HOME", tt.cache)
			t.Setenv("XDG_RUNTIME_DIR", tt.runtime)
			if got := extractDirs(tt.root); !slices.Equal(got, tt.want) {
				t.Errorf("extractDirs(root %v) = %q, want %q", tt.root, got, tt.want)
			}
		})
	}
}

// safeDir is a root-owned directory that others may enter but not change,
// in /tmp: what the attacker can see, so that only the checks stop it.
func safeDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "jitprof-safe-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestExtractRefusesUnsafeDirs: a directory another user could change, on
// the way or at the end, or a symlink, is refused with its path and why,
// and nothing is written there; a safe one is used, dir and file as set.
func TestExtractRefusesUnsafeDirs(t *testing.T) {
	attacker := fixtures.NewAttacker(t)
	data := []byte("\x7fELF the library")
	name := "libjitprof-jvmti.so"
	mkdir := func(path string, mode os.FileMode) string {
		t.Helper()
		if err := os.MkdirAll(path, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
		return path
	}
	safe := safeDir(t)
	evil := attacker.Dir(t)
	tests := []struct {
		name    string
		dir     func() string
		wantErr string // with the path named; "" for a safe directory
		absent  string // a path the refusal must not have made
	}{
		{"the attacker's home", func() string { return filepath.Join(evil, "jitprof") }, "owned by uid 61234", ""},
		{"the attacker's own jitprof directory", func() string {
			dir := mkdir(filepath.Join(safe, "theirs"), 0o755)
			attacker.Chown(t, dir)
			return dir
		}, "owned by uid 61234", ""},
		{"root's directory in the attacker's", func() string { return mkdir(filepath.Join(evil, "roots"), 0o755) }, "owned by uid 61234", ""},
		{"a world-writable parent", func() string { return filepath.Join(mkdir(filepath.Join(safe, "open"), 0o777), "jitprof") }, "writable by group or others (mode 0777)", ""},
		{"a group-writable parent", func() string { return filepath.Join(mkdir(filepath.Join(safe, "group"), 0o775), "jitprof") }, "writable by group or others (mode 0775)", ""},
		{"a sticky directory itself", func() string { return mkdir(filepath.Join(safe, "sticky"), os.ModeSticky|0o777) }, "writable by group or others (mode 1777)", ""},
		{"a symlink to a safe directory", func() string {
			link := filepath.Join(safe, "link")
			if err := os.Symlink(mkdir(filepath.Join(safe, "target"), 0o755), link); err != nil {
				t.Fatal(err)
			}
			return filepath.Join(link, "jitprof")
		}, "is a symlink", filepath.Join(safe, "target", "jitprof")},
		{"a symlink to the attacker's", func() string {
			link := filepath.Join(safe, "evil-link")
			if err := os.Symlink(evil, link); err != nil {
				t.Fatal(err)
			}
			return link
		}, "is a symlink", filepath.Join(evil, extractedName(name, data))},
		{"a relative path", func() string { return "jitprof" }, "not an absolute path", ""},
		{"root's, under sticky /tmp", func() string { return filepath.Join(safe, "sub", "jitprof") }, "", ""},
		{"a sticky parent", func() string {
			return filepath.Join(mkdir(filepath.Join(safe, "tmp"), os.ModeSticky|0o777), "jitprof")
		}, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := tt.dir()
			path, err := extract(name, data, []string{dir}, 0o755)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !namesPathIn(err.Error(), dir) {
					t.Fatalf("extracting into %s: %v (path %q); want an error naming the path and saying %q", dir, err, path, tt.wantErr)
				}
				if st, err := os.Lstat(dir); err == nil && st.IsDir() {
					if m, _ := filepath.Glob(filepath.Join(dir, "*")); len(m) > 0 {
						t.Errorf("refused %s, yet %v were written there", dir, m)
					}
				}
				if _, err := os.Lstat(tt.absent); tt.absent != "" && err == nil {
					t.Errorf("refused %s, yet %s was made", dir, tt.absent)
				}
				return
			}
			if err != nil || filepath.Dir(path) != dir {
				t.Fatalf("extracting into %s = %q, %v", dir, path, err)
			}
			for _, c := range []struct {
				path string
				mode os.FileMode
			}{{dir, os.ModeDir | 0o755}, {path, 0o444}} {
				st, err := os.Lstat(c.path)
				if err != nil || st.Mode() != c.mode || st.Sys().(*syscall.Stat_t).Uid != 0 {
					t.Errorf("%s: %v, %v; want root's, mode %v", c.path, st.Mode(), err, c.mode)
				}
			}
		})
	}
}

// namesPathIn tells whether msg says why dir, or a directory on its way,
// is refused: "PATH is ...".
func namesPathIn(msg, dir string) bool {
	for p := dir; ; p = filepath.Dir(p) {
		if strings.Contains(msg, p+" is ") {
			return true
		}
		if p == filepath.Dir(p) {
			return false
		}
	}
}

// TestExtractNextSafeDir: past a refused directory (the attacker's
// XDG_RUNTIME_DIR) the next safe one is used; with none, every refusal is
// said.
func TestExtractNextSafeDir(t *testing.T) {
	attacker := fixtures.NewAttacker(t)
	evil, safe := attacker.Dir(t), safeDir(t)
	data := []byte("lib")
	path, err := extract("libjitprof-ittjit.so", data, []string{filepath.Join(evil, "jitprof"), filepath.Join(safe, "jitprof")}, 0o700)
	if err != nil || !strings.HasPrefix(path, safe+"/") {
		t.Errorf("extracted to %q, %v; want a path in %s", path, err, safe)
	}
	_, err = extract("libjitprof-ittjit.so", data, []string{filepath.Join(evil, "a"), filepath.Join(evil, "b")}, 0o700)
	if err == nil || !strings.Contains(err.Error(), "not into "+filepath.Join(evil, "a")+": "+evil+" is owned by uid 61234") || !strings.Contains(err.Error(), "not into "+filepath.Join(evil, "b")) {
		t.Errorf("with no safe directory: %v; want both refusals", err)
	}
	if _, err := extract("libjitprof-ittjit.so", data, nil, 0o700); err == nil || !strings.Contains(err.Error(), "nowhere") {
		t.Errorf("with no directory: %v", err)
	}
}

// TestFindRefusesUnsafe: a library on disk that another user could swap,
// through its directory or the file itself, is refused, not passed over; a
// symlink to a safe one gives the safe one's own path.
func TestFindRefusesUnsafe(t *testing.T) {
	attacker := fixtures.NewAttacker(t)
	lib := "libjitprof-jvmti.so"
	put := func(dir string, mode os.FileMode) string {
		t.Helper()
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, lib)
		if err := os.WriteFile(path, []byte("lib"), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	safe := safeDir(t)
	evil := attacker.Dir(t)
	good := put(filepath.Join(safe, "good"), 0o755)
	tests := []struct {
		name    string
		dirs    func() []string
		want    string // the path found, or
		wantErr string // what the refusal says
	}{
		{"in the attacker's directory", func() []string { return []string{put(evil, 0o755), good} }, "", "owned by uid 61234"},
		{"the attacker's file in root's directory", func() []string {
			dir := put(filepath.Join(safe, "theirs"), 0o755)
			attacker.Chown(t, filepath.Join(dir, lib))
			return []string{dir, good}
		}, "", "owned by uid 61234"},
		{"a world-writable file", func() []string { return []string{put(filepath.Join(safe, "w"), 0o757), good} }, "", "writable by group or others (mode 0757)"},
		{"a group-writable directory", func() []string {
			dir := put(filepath.Join(safe, "g"), 0o755)
			os.Chmod(dir, 0o775)
			return []string{dir, good}
		}, "", "writable by group or others (mode 0775)"},
		{"a symlink in the attacker's directory to root's", func() []string {
			link := filepath.Join(evil, "link")
			if err := os.Symlink(good, link); err != nil {
				t.Fatal(err)
			}
			return []string{link}
		}, filepath.Join(good, lib), ""},
		{"root's", func() []string { return []string{filepath.Join(safe, "missing"), good} }, filepath.Join(good, lib), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dirs := tt.dirs()
			got, err := find(lib, dirs)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), dirs[0]) {
					t.Errorf("find in %q = %q, %v; want a refusal of %s saying %q", dirs, got, err, dirs[0], tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("find in %q = %q, %v; want %s", dirs, got, err, tt.want)
			}
		})
	}
}

// swapper runs the attacker's loop: over and over, it copies evil beside
// each target and renames it over the target, then bumps a counter, until
// the test ends. A target it cannot write is tried again all the same.
func swapper(t *testing.T, attacker fixtures.Attacker, evil string, targets []string) (rounds func() int) {
	t.Helper()
	count := filepath.Join(attacker.Dir(t), "rounds")
	script := `evil=$1 count=$2; shift 2; n=0
while :; do
	for t in "$@"; do
		mkdir -p "${t%/*}" 2>/dev/null
		cp "$evil" "$t.new" 2>/dev/null && mv -f "$t.new" "$t" 2>/dev/null
	done
	n=$((n+1)); echo $n >"$count"
done`
	cmd := attacker.Command("/bin/sh", append([]string{"-c", script, "sh", evil, count}, targets...)...)
	cmd.SysProcAttr.Setpgid = true
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		cmd.Wait()
	})
	return func() int {
		b, _ := os.ReadFile(count)
		n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
		return n
	}
}

// attackerHome points HOME and the XDG directories into a directory the
// attacker owns, as `sudo -E` from the attacker's shell would, and returns
// the extraction directories they give (extractDirs for a user).
func attackerHome(t *testing.T, attacker fixtures.Attacker) []string {
	home := attacker.Dir(t)
	t.Setenv("HOME", home)
	t.Setenv("XDG_CACHE_HOME", filepath.Join(home, ".cache"))
	t.Setenv("XDG_RUNTIME_DIR", filepath.Join(home, "run"))
	dirs := extractDirs(false)
	if len(dirs) != 2 || !strings.HasPrefix(dirs[0], home) || !strings.HasPrefix(dirs[1], home) {
		t.Fatalf("extractDirs = %q, not the attacker's directories in %s", dirs, home)
	}
	return dirs
}

// TestExtractUnderSwapAttack: with HOME and the XDG directories in the
// attacker's hands and the attacker renaming its own bytes over every path
// the library could be extracted to, every path handed out holds the
// library, root's and read-only. The attacker's loop is shown to work: the
// copy it targets in its own directory does hold its bytes.
func TestExtractUnderSwapAttack(t *testing.T) {
	attacker := fixtures.NewAttacker(t)
	dirs := append(attackerHome(t, attacker), filepath.Join(safeDir(t), "jitprof"))
	evil := filepath.Join(attacker.Dir(t), "evil.so")
	if err := os.WriteFile(evil, []byte("the attacker's library"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, k := range []Kind{JVMTI, IttJIT} {
		t.Run(k.String(), func(t *testing.T) {
			data, err := os.ReadFile(agentPath(t, k))
			if err != nil {
				t.Fatal(err)
			}
			var targets []string
			for _, dir := range dirs {
				targets = append(targets, filepath.Join(dir, extractedName(k.FileName(), data)))
			}
			rounds := swapper(t, attacker, evil, targets)
			for time.Sleep(time.Millisecond); rounds() < 1; time.Sleep(time.Millisecond) {
			}
			var runs int
			for start := rounds(); runs < 50 || rounds() < start+20; runs++ {
				path, err := extract(k.FileName(), data, dirs, 0o755)
				if err != nil {
					t.Fatal(err)
				}
				if path != targets[2] {
					t.Fatalf("extracted to %s, want %s", path, targets[2])
				}
				got, err := os.ReadFile(path)
				if err != nil || !bytes.Equal(got, data) {
					t.Fatalf("run %d: %s does not hold the library after extraction (%d bytes, %v)", runs, path, len(got), err)
				}
				if runs%10 == 0 {
					os.Remove(path) // extracted anew, not only checked
				}
			}
			if got, _ := os.ReadFile(targets[0]); !bytes.Equal(got, []byte("the attacker's library")) {
				t.Errorf("the attacker's loop never swapped %s, its own target: the test shows nothing", targets[0])
			}
			t.Logf("%d extractions during %d rounds of the attacker's loop", runs, rounds())
		})
	}
}

// TestJVMUnderSwapAttack: the same attack, on a real JVM as root. The
// attacker's library writes a marker as it loads (shown first, by loading
// it); while the attacker swaps, the JVM given the extracted path writes a
// dump through jitprof's agent, and the marker never appears.
func TestJVMUnderSwapAttack(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a JVM")
	}
	attacker := fixtures.NewAttacker(t)
	java := filepath.Join(jdkHome(t, "java17"), "bin", "java")
	classes, _ := compileJava(t)
	marker := filepath.Join(t.TempDir(), "pwned")
	evilSrc := filepath.Join(t.TempDir(), "evil.c")
	if err := os.WriteFile(evilSrc, []byte(`#include <fcntl.h>
#include <unistd.h>
__attribute__((constructor)) static void pwn(void) {
	int fd = open(MARKER, O_WRONLY | O_CREAT, 0644);
	if (fd >= 0)
		close(fd);
}
int Agent_OnLoad(void *vm, char *options, void *reserved) { (void)vm; (void)options; (void)reserved; return 0; }
`), 0o644); err != nil {
		t.Fatal(err)
	}
	evil := filepath.Join(attacker.Dir(t), "evil.so")
	if out, err := exec.Command("cc", "-shared", "-fPIC", `-DMARKER="`+marker+`"`, "-o", evil, evilSrc).CombinedOutput(); err != nil {
		t.Fatalf("cc: %v\n%s", err, out)
	}
	runJava := func(agent, dumpDir string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		out, err := exec.CommandContext(ctx, java, "-agentpath:"+agent+"=dir="+dumpDir, "-cp", classes, "Work", "200").CombinedOutput()
		if err != nil {
			t.Fatalf("java -agentpath:%s: %v\n%s", agent, err, out)
		}
		return string(out)
	}
	runJava(evil, t.TempDir())
	if _, err := os.Stat(marker); err != nil {
		t.Fatalf("the attacker's library, loaded, wrote no marker (%v): the test could not see an attack succeed", err)
	}
	os.Remove(marker)

	dirs := append(attackerHome(t, attacker), filepath.Join(safeDir(t), "jitprof"))
	data, err := os.ReadFile(agentPath(t, JVMTI))
	if err != nil {
		t.Fatal(err)
	}
	var targets []string
	for _, dir := range dirs {
		targets = append(targets, filepath.Join(dir, extractedName(JVMTI.FileName(), data)))
	}
	rounds := swapper(t, attacker, evil, targets)
	for time.Sleep(time.Millisecond); rounds() < 1; time.Sleep(time.Millisecond) {
	}
	for i := range 3 {
		path, err := extract(JVMTI.FileName(), data, dirs, 0o755)
		if err != nil {
			t.Fatal(err)
		}
		dumpDir := t.TempDir()
		runJava(path, dumpDir)
		if _, err := os.Stat(marker); err == nil {
			t.Fatalf("run %d: the JVM loaded the attacker's library from %s", i, path)
		}
		onlyDump(t, dumpDir) // jitprof's agent ran
		if got, err := os.ReadFile(path); err != nil || !bytes.Equal(got, data) {
			t.Fatalf("run %d: %s no longer holds the library (%v)", i, path, err)
		}
	}
	evilData, err := os.ReadFile(evil)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(targets[0]); !bytes.Equal(got, evilData) {
		t.Errorf("the attacker's loop never swapped %s, its own target: the test shows nothing", targets[0])
	}
	t.Logf("3 JVMs during %d rounds of the attacker's loop", rounds())
}
