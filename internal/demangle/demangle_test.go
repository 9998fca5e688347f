package demangle

import (
	"strings"
	"testing"
)

// The expected names were checked against perf 6.1's report (Debian
// 12's linux-perf), by recording a program whose functions carry these
// names, and for C++ against libiberty's cplus_demangle with no options,
// which perf calls.
var demangleTests = []struct {
	name, want string
}{
	// Not mangled.
	{"", ""},
	{"_", "_"},
	{"main", "main"},
	{"__libc_start_call_main", "__libc_start_call_main"},
	{"_start", "_start"},
	{"memcpy@plt", "memcpy@plt"},
	{"L", "L"},
	{"caml", "caml"},
	{"camlvalue", "camlvalue"}, // needs an upper-case letter after caml

	// C++: no parameters, no clone suffixes, no return types.
	{"_ZN4node5StartEiPPc", "node::Start"},
	{"_ZN3FooC2Ev", "Foo::Foo"},
	{"_ZN3FooD0Ev", "Foo::~Foo"},
	{"_ZNK3Foo3barEv", "Foo::bar"},
	{"_ZN3FooclEv", "Foo::operator()"},
	{"_ZN3FoocvbEv", "Foo::operator bool"},
	{"_ZL3fooi.constprop.0", "foo"},
	{"_Z3foov.part.0.isra.0", "foo"},
	{"_ZN4node5StartEiPPc.cold", "node::Start"},
	{"_Z1fIiEvT_", "f<int>"},
	{"_ZNKSt6vectorIiSaIiEE4sizeEv", "std::vector<int, std::allocator<int> >::size"},
	{"_ZN12_GLOBAL__N_13fooEv", "(anonymous namespace)::foo"},
	{"_ZN2v88internal12_GLOBAL__N_16InvokeEPNS0_7IsolateERKNS1_12InvokeParamsE", "v8::internal::(anonymous namespace)::Invoke"},
	{"_ZZ4mainE1x", "main::x"},
	{"_ZTV3Foo", "vtable for Foo"},
	{"_ZThn8_N3Foo3barEv", "non-virtual thunk to Foo::bar()"},
	{"_GLOBAL__I_abc", "global constructors keyed to abc"},
	{"_GLOBAL__D__ZN4node5StartEiPPc", "global destructors keyed to node::Start"},
	{"_GLOBAL__sub_I_foo.cc", "_GLOBAL__sub_I_foo.cc"},
	{"_Z", "_Z"},
	{"_Zjunk", "_Zjunk"},
	// libiberty's treatment of empty template argument packs.
	{"_ZNSt17_Function_handlerIFvvEZN2v84base8CallOnceIJEvEEvPSt6atomicIhENS2_16FunctionWithArgsIJDpT_EE4typeES9_EUlvE_E9_M_invokeERKSt9_Any_data",
		"std::_Function_handler<void (), v8::base::CallOnce<, void>(std::atomic<unsigned char>*, v8::base::FunctionWithArgs<>::type)::{lambda()#1}>::_M_invoke"},
	{"_ZN2v88internal28CFunctionBuilderWithFunctionINS_16CTypeInfoBuilderIvJEEEJNS2_INS_5LocalINS_5ValueEEEJEEEEE5BuildEv",
		"v8::internal::CFunctionBuilderWithFunction<v8::CTypeInfoBuilder<void>, v8::CTypeInfoBuilder<v8::Local<v8::Value>> >::Build"},
	{"_ZN2v88internal8compiler10turboshaft11ReducerBaseINS2_12ReducerStackINS2_9AssemblerINS2_12reducer_listIJEEEEEJEEEE10ReduceGotoEPNS2_5BlockE",
		"v8::internal::compiler::turboshaft::ReducerBase<v8::internal::compiler::turboshaft::ReducerStack<v8::internal::compiler::turboshaft::Assembler<v8::internal::compiler::turboshaft::reducer_list<> >> >::ReduceGoto"},
	// libiberty's treatment of the address of a function as a template argument.
	{"_ZN4node10StreamBase8JSMethodIXadL_ZNS0_11WriteStringILNS_8encodingE0EEEiRKN2v820FunctionCallbackInfoINS4_5ValueEEEEEEEvS9_",
		"node::StreamBase::JSMethod<&(int node::StreamBase::WriteString<(node::encoding)0>(v8::FunctionCallbackInfo<v8::Value> const&))>"},
	{"_ZN12v8_inspector9V8Console4callIXadL_ZNS0_10createTaskERKN2v820FunctionCallbackInfoINS2_5ValueEEEEEEEvS7_",
		"v8_inspector::V8Console::call<&v8_inspector::V8Console::createTask>"},

	// PLT entries: perf demangles the name, then adds @plt.
	{"_Znwm@plt", "operator new@plt"},
	{"_ZN4node5StartEiPPc@plt", "node::Start@plt"},
	{"camlFoo__bar@plt", "Foo.bar@plt"},
	{"Lfoo;bar()V@plt", "foo.bar()@plt"},
	{"@plt", "@plt"},
	{"_@plt", "_@plt"},

	// Rust, legacy and v0: no hash, no crate disambiguator.
	{"_ZN4core3ptr13drop_in_place17h0123456789abcdefE", "core::ptr::drop_in_place"},
	{"_ZN4main4main17he714a2e23ed7db23E", "main::main"},
	{"_ZN4core3ptr85drop_in_place$LT$std..rt..lang_start$LT$$LP$$RP$$GT$..$u7b$$u7b$closure$u7d$$u7d$$GT$17h0123456789abcdefE",
		"core::ptr::drop_in_place<std::rt::lang_start<()>::{{closure}}>"},
	{"_RNvCs15kBYyAo9fc_7mycrate7example", "mycrate::example"},
	{"_RNvMsr_NtCs3ssYzQotkvD_3std4pathNtB5_7PathBuf3new", "<std::path::PathBuf>::new"},

	// OCaml.
	{"camlStdlib__List__map_123", "Stdlib.List.map_123"},
	{"camlFoo$41bar", "FooAbar"},
	{"camlFoo$4", "Foo$4"},
	{"camlFoo_", "Foo_"},

	// Java, as perf's demangle-java.c prints it, quirks included.
	{"Ljava/lang/StringLatin1;equals([B[B)Z", "java.lang.StringLatin1.equals(byte[], byte[])"},
	{"Ljava/util/regex/Pattern$BmpCharProperty;match(Ljava/util/regex/Matcher;ILjava/lang/CharSequence;)Z",
		"java.util.regex.Pattern$BmpCharProperty.match(java.util.regex.Matcher, int, java.lang.CharSequence)"},
	{"Ljava/lang/Object;<init>()V", "java.lang.Object<init>()"},
	{"Lfoo;bar([Ljava/lang/String;I)V", "foo.bar(java.lang.String, int[])"},
	{"Lfoo;baz(ZZZZZZZZ)V", "foo.baz(boolean, boolean, boolean, boolean, boolean, bool"},
	{"Lfoo;v([[JV[D)V", "foo.v(long[][]void, double[])"},
	{"Lfoo;\xc3\xa9t()V", "foo.\xc3\xa9t()"},
	{"Lfoo;bar", "Lfoo;bar"},
	{"Lfoo/bar;baz(", "Lfoo/bar;baz("},
	{"Lfoo;bar(I", "Lfoo;bar(I"},
	{"Lfoo;bar(I))V", "foo.bar(int))"},
	{"Lfoo;b;ar()V", "Lfoo;b;ar()V"},
	{"Lfoo;b/ar()V", "Lfoo;b/ar()V"},
	{"Lfoo;bar()[V", "foo.bar()"},
	{"L;x()V", ".x()"},
	{"Lx)", "Lx)"},
}

func TestDemangle(t *testing.T) {
	for _, tt := range demangleTests {
		if got := Name(tt.name); got != tt.want {
			t.Errorf("Name(%q) = %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestDemangleNoAllocForPlainNames(t *testing.T) {
	for _, name := range []string{"main", "memcpy@plt", "__libc_start_call_main", "Lx", "cold"} {
		if n := testing.AllocsPerRun(100, func() { Name(name) }); n != 0 {
			t.Errorf("Name(%q) allocates %v times", name, n)
		}
	}
}

func FuzzDemangle(f *testing.F) {
	for _, tt := range demangleTests {
		f.Add(tt.name)
	}
	f.Fuzz(func(t *testing.T, name string) {
		s := Name(name)
		if len(name) > 0 && strings.IndexByte("_cL", name[0]) < 0 && s != name {
			t.Errorf("Name(%q) = %q, but only _, c and L start mangled names", name, s)
		}
		if strings.HasPrefix(name, "L") && strings.IndexByte(name, ')') < 0 && s != name {
			t.Errorf("Name(%q) = %q, but Java names need a ')'", name, s)
		}
	})
}

func BenchmarkDemangle(b *testing.B) {
	for _, bb := range []struct{ kind, name string }{
		{"plain", "__memmove_avx_unaligned_erms"},
		{"cxx", "_ZN2v88internal12_GLOBAL__N_16InvokeEPNS0_7IsolateERKNS1_12InvokeParamsE"},
		{"cxx-pack", "_ZN2v88internal28CFunctionBuilderWithFunctionINS_16CTypeInfoBuilderIvJEEEJNS2_INS_5LocalINS_5ValueEEEJEEEEE5BuildEv"},
		{"rust", "_RNvMsr_NtCs3ssYzQotkvD_3std4pathNtB5_7PathBuf3new"},
		{"java", "Ljava/util/regex/Pattern$BmpCharProperty;match(Ljava/util/regex/Matcher;ILjava/lang/CharSequence;)Z"},
	} {
		b.Run(bb.kind, func(b *testing.B) {
			for b.Loop() {
				Name(bb.name)
			}
		})
	}
}
