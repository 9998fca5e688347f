// Package demangle turns raw symbol names into the names perf report shows
// with its default options.
//
// perf 6.1 (tools/perf/util/symbol-elf.c, demangle_sym) tries, in order:
// libiberty's cplus_demangle with no options, which handles Itanium C++
// and both Rust manglings and leaves out function parameters, clone
// suffixes and Rust hashes; perf's OCaml demangler; and perf's Java
// demangler, asked to leave out the return type. The first that succeeds
// wins; a name none of them accepts is shown as it is.
//
// perf applies this to the symbols of ELF files only: kernel symbols are
// not demangled by default (symbol_conf.demangle_kernel), and neither are
// the names read from /tmp/perf-PID.map files.
package demangle

import (
	"strings"

	"github.com/ianlancetaylor/demangle"
)

// Name returns name as perf report shows it. Names that are not
// mangled cost a byte comparison or two.
//
// perf names a PLT entry after the function it calls, demangled, plus
// "@plt"; given the raw name plus "@plt", as elfsym gives it, Demangle
// demangles the part before "@plt". A mangled name holds no space: what
// follows one is a mark jitprof added to the runtime's name (" [interpreted]"
// after a Java method's), kept after the demangled part.
func Name(name string) string {
	if len(name) < 2 {
		return name
	}
	switch name[0] {
	case '_', 'c', 'L':
	default:
		return name
	}
	if base, ok := strings.CutSuffix(name, "@plt"); ok {
		return demangleAny(base) + "@plt"
	}
	if i := strings.IndexByte(name, ' '); i > 0 {
		return demangleAny(name[:i]) + name[i:]
	}
	return demangleAny(name)
}

func demangleAny(name string) string {
	if len(name) < 2 {
		return name
	}
	switch name[0] {
	case '_':
		if s, ok := demangleCxx(name); ok {
			return s
		}
	case 'c':
		if s, ok := demangleOCaml(name); ok {
			return s
		}
	case 'L':
		if s, ok := demangleJava(name); ok {
			return s
		}
	}
	return name
}

// demangleCxx mimics cplus_demangle(name, DMGL_NO_OPTS) in libiberty's
// automatic style, which perf calls when it is not verbose.
func demangleCxx(name string) (string, bool) {
	switch {
	case name[1] == 'R':
		s, err := demangle.ToString(name, demangle.NoParams)
		return s, err == nil
	case name[1] == 'Z':
		return demangleItanium(name)
	case strings.HasPrefix(name, "_GLOBAL_"):
		return globalCDtor(name)
	}
	return "", false
}

// globalCDtor handles the names GCC gives the functions that run a
// translation unit's constructors and destructors: _GLOBAL_ followed by
// one of ".$_", then I or D, then "_" and the key, itself demangled when
// it is a mangled name. libiberty's d_demangle accepts exactly this form.
func globalCDtor(name string) (string, bool) {
	const prefix = "_GLOBAL_"
	rest := name[len(prefix):]
	if len(rest) < 3 || strings.IndexByte(".$_", rest[0]) < 0 || rest[2] != '_' {
		return "", false
	}
	var kind string
	switch rest[1] {
	case 'I':
		kind = "global constructors keyed to "
	case 'D':
		kind = "global destructors keyed to "
	default:
		return "", false
	}
	key := rest[3:]
	if strings.HasPrefix(key, "_Z") {
		if s, ok := demangleItanium(key); ok {
			key = s
		}
	}
	return kind + key, true
}

// demangleItanium demangles a C++ name, or a legacy Rust name, which
// shares the prefix.
//
// The Go demangler prints two C++ constructs differently from the
// libiberty perf 6.1 links; they are rewritten in the tree before
// printing. Most names have neither, and a substring test on the mangled
// name keeps them on the plain path.
func demangleItanium(name string) (string, bool) {
	emptyPack := strings.Contains(name, "JE")    // J...E with nothing inside
	funcAddr := strings.Contains(name, "XadL_Z") // &function as a template argument
	if !emptyPack && !funcAddr || isLegacyRust(name) {
		s, err := demangle.ToString(name, demangle.NoParams)
		return s, err == nil
	}
	a, err := demangle.ToAST(name, demangle.NoParams)
	if err != nil {
		return "", false
	}
	a = rewrite(a)
	s := demangle.ASTToString(a)
	if emptyPack {
		s = dropEmptyPacks(s)
	}
	return s, true
}

// isLegacyRust reports whether name has the form of a legacy Rust symbol,
// _ZN...17h<16 hex digits>E with an optional "." suffix, which the Go
// demangler (like libiberty) hands to its Rust demangler.
func isLegacyRust(name string) bool {
	if i := strings.LastIndex(name, "E."); i > 0 {
		name = name[:i+1]
	}
	n := len(name)
	return strings.HasPrefix(name, "_ZN") && n > 23 && name[n-1] == 'E' && name[n-20:n-17] == "17h"
}

// emptyPackMark stands for an empty template argument pack in a template
// argument list. libiberty prints an argument list as the first argument
// followed by ", " and the rest, and takes the ", " back only when the
// whole rest printed nothing. So an empty pack leaves a bare ", " unless
// only empty packs follow it ("<, void>" for CallOnce<J E, void>), and a
// list ending in empty packs ends with the ", " taken back but remembered
// as the last character printed, which suppresses the space libiberty
// otherwise puts between two '>' (Local<Value>> instead of
// Local<Value> >). The Go demangler simply skips empty packs; the mark
// makes them visible in its output, and dropEmptyPacks then applies
// libiberty's rules.
const emptyPackMark = "\x00"

// rewrite marks the empty packs of template argument lists and spells out
// the type of a function whose address is a template argument, as
// libiberty does for any but a plainly qualified name (&(int f<1>(char))
// where the Go demangler prints &(f<1>)).
func rewrite(a demangle.AST) demangle.AST {
	mark := &demangle.Name{Name: emptyPackMark}
	c := a.Copy(func(n demangle.AST) demangle.AST {
		switch n := n.(type) {
		case *demangle.Template:
			var args []demangle.AST
			for i, arg := range n.Args {
				if p, ok := arg.(*demangle.ArgumentPack); ok && len(p.Args) == 0 {
					if args == nil {
						args = append([]demangle.AST(nil), n.Args...)
					}
					args[i] = mark
				}
			}
			if args != nil {
				return &demangle.Template{Name: n.Name, Args: args}
			}
		case *demangle.Unary:
			op, ok := n.Op.(*demangle.Operator)
			if !ok || op.Name != "&" || n.Suffix {
				break
			}
			t, ok := n.Expr.(*demangle.Typed)
			if !ok {
				break
			}
			if _, ok := t.Type.(*demangle.FunctionType); !ok {
				break
			}
			// libiberty leaves out the type only when the name is
			// qualified, as the Go demangler does anyway.
			if _, ok := t.Name.(*demangle.Qualified); !ok {
				return &demangle.Name{Name: "&(" + demangle.ASTToString(t) + ")"}
			}
		}
		return nil
	}, func(demangle.AST) bool { return false })
	if c == nil {
		return a
	}
	return c
}

// dropEmptyPacks turns the marks left by rewrite into libiberty's output:
// marks that close a list go with their separators, the others leave
// their separators behind.
func dropEmptyPacks(s string) string {
	for strings.Contains(s, ", "+emptyPackMark+">") {
		s = strings.ReplaceAll(s, ", "+emptyPackMark+">", emptyPackMark+">")
	}
	return strings.ReplaceAll(s, emptyPackMark, "")
}
