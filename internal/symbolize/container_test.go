package symbolize

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/jitprof/jitprof/internal/elfsym"
	"github.com/jitprof/jitprof/internal/fixtures"
	"github.com/jitprof/jitprof/internal/jitsources"
	"github.com/jitprof/jitprof/internal/procfs"
	"github.com/jitprof/jitprof/perfdata"
)

// TestContainersApart: two containers, processes in mount namespaces of
// their own (a /proc the test lays out), map one file at one path (the
// same device and inode: a layer both images share) that this side does
// not have. Each container's file is read in its own root, a module of its
// own: a debug file one of them put beside it, naming the code otherwise,
// names that container's samples and not the other's. (When both were one
// module, read in the root of the first to map it, the first container's
// names went on the other's samples.)
func TestContainersApart(t *testing.T) {
	gcc := fixtures.LookPath(t, "gcc")
	dir := t.TempDir()
	src := filepath.Join(dir, "prog.c")
	if err := os.WriteFile(src, []byte("int victim_fn(int x) { return x * 3; }\nint main(void) { return victim_fn(1); }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	build := func(out string, flags ...string) {
		if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
			t.Fatal(err)
		}
		args := append([]string{"-O1", "-no-pie", "-Wl,--build-id=none", "-o", out, src}, flags...)
		if b, err := exec.Command(gcc, args...).CombinedOutput(); err != nil {
			t.Fatalf("gcc: %v\n%s", err, b)
		}
	}
	layer := filepath.Join(dir, "layer", "prog")
	build(layer)
	const path = "/app/prog"
	tenant, victim := uint32(1<<22+11), uint32(1<<22+12)
	roots := map[uint32]string{tenant: filepath.Join(dir, "tenant"), victim: filepath.Join(dir, "victim")}
	for _, root := range roots {
		if err := os.MkdirAll(filepath.Join(root, "app"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Link(layer, filepath.Join(root, path)); err != nil {
			t.Fatal(err)
		}
	}
	// The tenant's debug file, where perf looks for one by the path.
	build(filepath.Join(roots[tenant], "/usr/lib/debug", path+".debug"), "-Dvictim_fn=tenant_fn")

	proc := filepath.Join(dir, "proc")
	link := func(to string, at ...string) {
		p := filepath.Join(append([]string{proc}, at...)...)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(to, p); err != nil {
			t.Fatal(err)
		}
	}
	link("mnt:[4026531841]", "self", "ns", "mnt")
	uid := os.Getuid()
	for pid, root := range roots {
		p := fmt.Sprint(pid)
		link(root, p, "root")
		link(fmt.Sprintf("mnt:[%d]", 4026532000+pid), p, "ns", "mnt")
		status := fmt.Sprintf("Name:\tprog\nUid:\t%d\t%d\t%d\t%d\nGid:\t%d\t%d\t%d\t%d\nGroups:\t\nNSpid:\t%s\t1\n", uid, uid, uid, uid, uid, uid, uid, uid, p)
		stat := fmt.Sprintf("%s (prog) S%s 0 0\n", p, " 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0") // started at boot
		for name, text := range map[string]string{"status": status, "stat": stat} {
			if err := os.WriteFile(filepath.Join(proc, p, name), []byte(text), 0o444); err != nil {
				t.Fatal(err)
			}
		}
	}

	var st unix.Stat_t
	if err := unix.Stat(layer, &st); err != nil {
		t.Fatal(err)
	}
	table, err := elfsym.Open(layer)
	if err != nil {
		t.Fatal(err)
	}
	var fn elfsym.Symbol
	for s := range table.Symbols() {
		if s.Name == "victim_fn" {
			fn = s
		}
	}
	table.Close()
	if fn.Name == "" {
		t.Fatal("gcc's program has no victim_fn")
	}
	at := func(pid uint32, time uint64) *perfdata.Mmap2 {
		m := mmap(pid, time, 0x400000, 0x10000, path)
		m.Maj, m.Min, m.Ino = unix.Major(st.Dev), unix.Minor(st.Dev), st.Ino
		return m
	}
	rec := filepath.Join(dir, "perf.data")
	writeRecording(t, rec, buildCase{records: []perfdata.Record{at(tenant, 1), at(victim, 2)}}, func(s string) string { return s })
	var warnings []string
	sp := buildFrom(t, rec, Options{Host: jitsources.Host{Proc: procfs.FS(proc)}, Warn: func(err error) { warnings = append(warnings, err.Error()) }})
	defer sp.Close()
	for pid, want := range map[uint32]string{victim: "victim_fn", tenant: "tenant_fn"} {
		if got := sp.Lookup(pid, fn.Start, 3, false).Symbol.Name; got != want {
			t.Errorf("pid %d's sample in %s: named %q, want %q (warnings %q)", pid, path, got, want, warnings)
		}
	}
}
