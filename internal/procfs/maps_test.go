package procfs

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func TestParseMapsLine(t *testing.T) {
	for _, tc := range []struct {
		line string
		want Mapping
		err  string
	}{
		{line: "55ade6605000-55ade660a000 r-xp 00002000 fe:00 247766                     /usr/bin/sleep",
			want: Mapping{Start: 0x55ade6605000, End: 0x55ade660a000, Pgoff: 0x2000, Prot: unix.PROT_READ | unix.PROT_EXEC,
				Flags: unix.MAP_PRIVATE, Maj: 0xfe, Ino: 247766, Name: "/usr/bin/sleep"}},
		{line: "7f0000000000-7f0000001000 r-xs 00000000 103:02 12 /tmp/my dir/jit-12.dump (deleted)",
			want: Mapping{Start: 0x7f0000000000, End: 0x7f0000001000, Prot: unix.PROT_READ | unix.PROT_EXEC,
				Flags: unix.MAP_SHARED, Maj: 0x103, Min: 2, Ino: 12, Name: "/tmp/my dir/jit-12.dump (deleted)"}},
		{line: "7f0000000000-7f0000001000 rwxp 00000000 00:00 0 ",
			want: Mapping{Start: 0x7f0000000000, End: 0x7f0000001000, Prot: unix.PROT_READ | unix.PROT_WRITE | unix.PROT_EXEC,
				Flags: unix.MAP_PRIVATE, Name: "//anon"}},
		{line: "ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0                  [vsyscall]",
			want: Mapping{Start: 0xffffffffff600000, End: 0xffffffffff601000, Prot: unix.PROT_EXEC, Flags: unix.MAP_PRIVATE, Name: "[vsyscall]"}},
		{line: "", err: "start address"},
		{line: "10-0 r-xp 0 00:00 0", err: "end address"},
		{line: "0-10 r-x 0 00:00 0", err: "permissions"},
		{line: "0-10 r-xp zz 00:00 0", err: "offset"},
		{line: "0-10 r-xp 0 0000 0", err: "device"},
		{line: "0-10 r-xp 0 00:00 -1", err: "inode"},
	} {
		got, err := parseMapsLine(tc.line)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: error %v, want one about the %s", tc.line, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%q:\n got %+v, %v\nwant %+v", tc.line, got, err, tc.want)
		}
	}
}

func FuzzParseMaps(f *testing.F) {
	f.Add([]byte("55ade6605000-55ade660a000 r-xp 00002000 fe:00 247766   /usr/bin/sleep\n7f-80 ---s 0 0:0 0\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		ms, err := ParseMaps(b)
		for _, m := range ms {
			if err == nil && (m.End < m.Start || m.Name == "") {
				t.Fatalf("accepted %+v", m)
			}
		}
	})
}

// TestMaps: a process's maps are read from the FS's own /proc, and a line
// that is no mapping is an error naming the file.
func TestMaps(t *testing.T) {
	root := t.TempDir()
	fs := FS(root)
	for pid, maps := range map[string]string{"7": "10-20 r-xp 00000000 00:00 0 \n", "8": "10-20 r-xp\n"} {
		if err := os.MkdirAll(filepath.Join(root, pid), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, pid, "maps"), []byte(maps), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if ms, err := fs.Maps(7); err != nil || len(ms) != 1 || ms[0].Start != 0x10 || ms[0].Name != "//anon" {
		t.Errorf("maps of 7: %+v, %v", ms, err)
	}
	if _, err := fs.Maps(8); err == nil || !strings.Contains(err.Error(), filepath.Join(root, "8", "maps")) {
		t.Errorf("maps of 8: %v, want an error naming the file", err)
	}
	if _, err := fs.Maps(9); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("maps of 9: %v, want not existing", err)
	}
}
