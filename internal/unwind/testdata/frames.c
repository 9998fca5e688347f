// Functions of varied frames, for the .debug_frame test: compiled with
// -fno-asynchronous-unwind-tables -g, their CFI goes to .debug_frame.
#include <alloca.h>
#include <stdarg.h>
#include <string.h>

int sink(const char *p, int n);

int leaf(int x) { return x * 3 + 1; }

int saves(int a, int b, int c, int d, int e, int f) {
	int s = 0;
	for (int i = 0; i < a; i++)
		s += sink("x", i * b + c) ^ sink("y", d + e * f + i);
	return s + a + b + c + d + e + f;
}

int dynamic(int n) {
	char *p = alloca(n + 1);
	memset(p, 'a', n);
	p[n] = 0;
	return sink(p, n);
}

int variadic(int n, ...) {
	va_list ap;
	va_start(ap, n);
	int s = 0;
	for (int i = 0; i < n; i++)
		s += va_arg(ap, int);
	va_end(ap);
	return sink("v", s);
}

int early(int n) {
	if (n < 0)
		return 0;
	char buf[256];
	for (int i = 0; i < n && i < 255; i++)
		buf[i] = (char)sink("e", i);
	buf[255] = 0;
	return sink(buf, n) + leaf(n);
}
