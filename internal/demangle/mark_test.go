package demangle

import "testing"

// A mark after a mangled name is kept after the demangled name; names with
// spaces that were not mangled are left as they are.
func TestNameMark(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"LWork;fib(I)J [interpreted]", "Work.fib(int) [interpreted]"},
		{"Ljava/lang/String;hashCode()I [interpreted]", "java.lang.String.hashCode() [interpreted]"},
		{"_Z3foov [interpreted]", Name("_Z3foov") + " [interpreted]"},
		{"counter_overflow Runtime1 stub", "counter_overflow Runtime1 stub"},
		{"Lua function f", "Lua function f"},
		{"Work.fib(int) [interpreted]", "Work.fib(int) [interpreted]"},
	} {
		if got := Name(tc.in); got != tc.want {
			t.Errorf("Name(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
