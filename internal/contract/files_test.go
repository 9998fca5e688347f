package contract

import (
	"testing"

	"github.com/jitprof/jitprof/internal/foreign"
)

// TestPlace: a file found in a container's root is read there, by path and
// build-id; found in two roots it is read at its path, in neither, since
// either container could have given its file the other's build-id.
func TestPlace(t *testing.T) {
	in := func(root string) foreign.Path {
		return foreign.Path{Name: "/app/bin", Rules: foreign.Rules{Root: root}}
	}
	// plain tells the path read where it is: no root, as the caller.
	plain := func(p foreign.Path) bool { return p.Name == "/app/bin" && p.Rules.Root == "" && p.Rules.As == nil }
	var f Files
	if got := f.Place("/app/bin", "ab"); !plain(got) {
		t.Errorf("nothing found elsewhere: %v", got)
	}
	f.ReadElsewhere("/app/bin", "ab", in("/proc/7/root"))
	if got := f.Place("/app/bin", "ab"); got.Rules.Root != "/proc/7/root" {
		t.Errorf("found in one root: %v", got)
	}
	if got := f.Place("/app/bin", "cd"); !plain(got) {
		t.Errorf("another build-id: %v", got)
	}
	if got := f.Place("/app/bin", ""); !plain(got) {
		t.Errorf("no build-id: %v", got)
	}
	f.ReadElsewhere("/app/bin", "ab", in("/proc/7/root")) // the same root again
	if got := f.Place("/app/bin", "ab"); got.Rules.Root != "/proc/7/root" {
		t.Errorf("found again in the same root: %v", got)
	}
	for _, root := range []string{"/proc/9/root", "/proc/7/root"} {
		f.ReadElsewhere("/app/bin", "ab", in(root))
		if got := f.Place("/app/bin", "ab"); !plain(got) {
			t.Errorf("found in two roots, then %s: %v", root, got)
		}
	}
	var none *Files
	if got := none.Place("/app/bin", "ab"); !plain(got) {
		t.Errorf("nil Files: %v", got)
	}
}
