/*
 * jitprof's Intel JIT Profiling API collector: turns the API's events into a
 * jitdump file. See jitprofiling.h for the entry points and the inline
 * extension record.
 *
 * The collector lives inside the host (a PHP interpreter, a JavaScript
 * engine...), so it never aborts it: bad event data is dropped or cut to
 * size, with one line on stderr per kind of problem; a failure of the dump
 * itself (full disk, unwritable directory) disables the writer, which logs
 * once. Either way the host goes on and its calls succeed.
 *
 * Threads: every event runs under one mutex (several compiler threads may
 * report at once); the writer's own lock is only ever taken inside it.
 */
#define _GNU_SOURCE
#include "jitprofiling.h"
#include "jitdump_writer.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

/* The ABI: these layouts are what runtimes compiled against Intel's header
 * pass, so a mistake here would misread every event. */
_Static_assert(sizeof(LineNumberInfo) == 8, "LineNumberInfo");
_Static_assert(offsetof(iJIT_Method_Load, line_number_table) == 32 && offsetof(iJIT_Method_Load, source_file_name) == 56 && sizeof(iJIT_Method_Load) == 64, "iJIT_Method_Load");
_Static_assert(offsetof(iJIT_Method_Load_V2, class_file_name) == 40 && offsetof(iJIT_Method_Load_V2, module_name) == 56 && sizeof(iJIT_Method_Load_V2) == 64, "iJIT_Method_Load_V2");
_Static_assert(offsetof(iJIT_Method_Load_V3, module_arch) == 64 && sizeof(iJIT_Method_Load_V3) == 72, "iJIT_Method_Load_V3");
_Static_assert(offsetof(iJIT_Method_Inline_Load, source_file_name) == 48 && sizeof(iJIT_Method_Inline_Load) == 56, "iJIT_Method_Inline_Load");
_Static_assert(offsetof(iJIT_Method_Update, data_format) == 16 && sizeof(iJIT_Method_Update) == 24, "iJIT_Method_Update");
_Static_assert(ITTJIT_JITDUMP_INLINE_ID == JD_INLINE_ID, "the header documents the writer's inline record");

#define TAG "jitprof-ittjit"

/* No real table comes near this many lines; a longer one is cut to it, so a
 * garbage line_number_size cannot make the collector read or allocate
 * without bound. */
#define MAX_LINES (1u << 20)

/* Kinds of bad input, each logged once. */
enum problem {
	P_NULL_DATA,
	P_NO_ID,
	P_EMPTY_CODE,
	P_HUGE_CODE,
	P_UNREADABLE_CODE,
	P_UNREADABLE_LINES,
	P_LONG_LINES,
	P_INLINE_ORPHAN,
	P_UPDATE_ORPHAN,
	P_NO_MEMORY,
	P_UNKNOWN_EVENT,
	P_COUNT
};

/* A method: what its first notification said. It lives while it has code. */
struct method {
	uint32_t id;
	uint32_t regions; /* live regions naming it */
	char *name;
	char *file;       /* NULL when unknown */
	struct method *next; /* hash chain */
};

/* One stored inline record, kept so that an update of its region can write
 * it again for the region's new code index. */
struct inline_rec {
	unsigned char *payload; /* starts with the code index */
	size_t size;
};

/* A live code region: one CODE_LOAD. */
struct region {
	uint64_t start, end;
	uint64_t code_index;
	struct method *m;
	jd_debug_entry *lines;
	size_t n_lines;
	struct inline_rec *inlines;
	size_t n_inlines;
};

static struct {
	pthread_mutex_t mu;
	pthread_once_t once;
	jd_writer *w;
	int closed; /* after SHUTDOWN */
	int off;    /* the writer gave up (full disk...): events are ignored */
	pid_t pid;  /* this process's, kept across calls: getpid is a system call */
	unsigned logged; /* bit per enum problem */

	struct method **buckets;
	size_t n_buckets, n_methods;

	struct region *regions; /* sorted by start, never overlapping */
	size_t n_regions, cap_regions;

	unsigned char *code; /* scratch copy of the code being loaded */
	size_t code_cap;
} g = {.mu = PTHREAD_MUTEX_INITIALIZER, .once = PTHREAD_ONCE_INIT};

static unsigned int next_method_id = 1;

static void log_once(enum problem p, const char *fmt, ...)
{
	if (g.logged & (1u << p))
		return;
	g.logged |= 1u << p;
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	fprintf(stderr, "%s: %s (reported once; the program goes on)\n", TAG, msg);
}

/* read_memory copies n bytes the host says are at src, through the kernel so
 * that a wrong address or size fails instead of crashing the host. Where the
 * kernel refuses the call itself (seccomp, old kernels), it trusts the host. */
static int read_memory(void *dst, const void *src, size_t n)
{
	if (n == 0)
		return 0;
	if (!src)
		return -1;
	struct iovec local = {dst, n}, remote = {(void *)src, n};
	ssize_t got = process_vm_readv(g.pid, &local, 1, &remote, 1, 0);
	if (got == (ssize_t)n)
		return 0;
	if (got < 0 && (errno == ENOSYS || errno == EPERM)) {
		memcpy(dst, src, n);
		return 0;
	}
	return -1;
}

/* Length of the valid UTF-8 sequence at s (n bytes left), or 0. */
static size_t utf8_len(const unsigned char *s, size_t n)
{
	unsigned char c = s[0];
	if (c < 0x80)
		return 1;
	size_t len;
	unsigned char lo = 0x80, hi = 0xBF; /* range of the second byte */
	if (c >= 0xC2 && c <= 0xDF)
		len = 2;
	else if (c >= 0xE0 && c <= 0xEF) {
		len = 3;
		if (c == 0xE0)
			lo = 0xA0; /* overlong */
		if (c == 0xED)
			hi = 0x9F; /* surrogates */
	} else if (c >= 0xF0 && c <= 0xF4) {
		len = 4;
		if (c == 0xF0)
			lo = 0x90;
		if (c == 0xF4)
			hi = 0x8F;
	} else
		return 0;
	if (n < len || s[1] < lo || s[1] > hi)
		return 0;
	for (size_t i = 2; i < len; i++)
		if ((s[i] & 0xC0) != 0x80)
			return 0;
	return len;
}

/* Appends the first n bytes of s to out as UTF-8, each byte that is not
 * part of a valid sequence replaced by U+FFFD (3 bytes): reports and pprof
 * files hold text. out has room for 3 * n bytes more. */
static size_t append_utf8(char *out, const char *s, size_t n)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t o = 0;
	for (size_t i = 0; i < n;) {
		size_t len = utf8_len(p + i, n - i);
		if (len == 0) {
			memcpy(out + o, "\xEF\xBF\xBD", 3);
			o += 3;
			i++;
			continue;
		}
		memcpy(out + o, p + i, len);
		o += len;
		i += len;
	}
	return o;
}

/* The name the dump gives a method: "class::method" when the runtime names a
 * class, else the method's name; "jit_method_<id>" when it names nothing.
 * Each part is cut to JD_MAX_NAME bytes. */
static char *make_name(const char *cls, const char *method, uint32_t id)
{
	size_t cls_len = cls ? strnlen(cls, JD_MAX_NAME) : 0, method_len = method ? strnlen(method, JD_MAX_NAME) : 0;
	char *out = malloc(3 * (cls_len + method_len) + 32);
	if (!out)
		return NULL;
	size_t o = 0;
	if (cls_len) {
		o += append_utf8(out, cls, cls_len);
		memcpy(out + o, "::", 2);
		o += 2;
	}
	if (method_len)
		o += append_utf8(out + o, method, method_len);
	else
		o += (size_t)sprintf(out + o, "jit_method_%u", id);
	out[o] = 0;
	return out;
}

/* A sanitized copy of a file name, or NULL for none. */
static char *make_file(const char *file)
{
	size_t len = file ? strnlen(file, JD_MAX_NAME) : 0;
	if (len == 0)
		return NULL;
	char *out = malloc(3 * len + 1);
	if (out)
		out[append_utf8(out, file, len)] = 0;
	return out;
}

/* ---- methods, by id ---- */

static struct method **method_slot(uint32_t id)
{
	struct method **p = &g.buckets[(id * 2654435761u) & (g.n_buckets - 1)];
	while (*p && (*p)->id != id)
		p = &(*p)->next;
	return p;
}

static struct method *method_find(uint32_t id)
{
	return g.n_buckets ? *method_slot(id) : NULL;
}

static int methods_grow(void)
{
	size_t n = g.n_buckets ? 2 * g.n_buckets : 256;
	struct method **b = calloc(n, sizeof *b);
	if (!b)
		return -1;
	struct method **old = g.buckets;
	size_t old_n = g.n_buckets;
	g.buckets = b;
	g.n_buckets = n;
	for (size_t i = 0; i < old_n; i++)
		for (struct method *m = old[i], *next; m; m = next) {
			next = m->next;
			struct method **slot = method_slot(m->id);
			m->next = NULL;
			*slot = m;
		}
	free(old);
	return 0;
}

static struct method *method_add(uint32_t id, const char *cls, const char *name, const char *file)
{
	if (g.n_methods >= g.n_buckets && methods_grow() != 0)
		return NULL;
	struct method *m = calloc(1, sizeof *m);
	if (!m)
		return NULL;
	m->id = id;
	m->name = make_name(cls, name, id);
	m->file = make_file(file);
	if (!m->name || (file && *file && !m->file)) {
		free(m->name);
		free(m->file);
		free(m);
		return NULL;
	}
	*method_slot(id) = m;
	g.n_methods++;
	return m;
}

static void method_remove(struct method *m)
{
	*method_slot(m->id) = m->next;
	g.n_methods--;
	free(m->name);
	free(m->file);
	free(m);
}

/* ---- regions, by address ---- */

/* Index of the first region that ends after addr. */
static size_t region_after(uint64_t addr)
{
	size_t lo = 0, hi = g.n_regions;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (g.regions[mid].end <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* The region holding [start, end), or NULL. */
static struct region *region_holding(uint64_t start, uint64_t end)
{
	size_t i = region_after(start);
	if (i < g.n_regions && g.regions[i].start <= start && end <= g.regions[i].end)
		return &g.regions[i];
	return NULL;
}

static void region_free(struct region *r)
{
	free(r->lines);
	for (size_t i = 0; i < r->n_inlines; i++)
		free(r->inlines[i].payload);
	free(r->inlines);
}

/* Drops region i. A method left without code is forgotten, unless it is
 * keep (the method being loaded, whose id stays meaningful). */
static void region_drop(size_t i, const struct method *keep)
{
	struct region *r = &g.regions[i];
	struct method *m = r->m;
	region_free(r);
	memmove(r, r + 1, (g.n_regions - i - 1) * sizeof *r);
	g.n_regions--;
	if (--m->regions == 0 && m != keep)
		method_remove(m);
}

/* Unloads every region overlapping [start, end): the API's "a load over an
 * already reported range makes the old method invalid". Returns the index
 * where a region at start goes. */
static size_t regions_clear(uint64_t start, uint64_t end, const struct method *keep)
{
	size_t i = region_after(start);
	while (i < g.n_regions && g.regions[i].start < end)
		region_drop(i, keep);
	return i;
}

/* ---- line tables ---- */

struct line_in {
	uint32_t end, line, order;
};

static int by_end(const void *a, const void *b)
{
	const struct line_in *x = a, *y = b;
	if (x->end != y->end)
		return x->end < y->end ? -1 : 1;
	return x->order < y->order ? -1 : x->order > y->order;
}

/*
 * lines_convert turns a region's table (end offsets, see LineNumberInfo) into
 * DEBUG_INFO entries at the addresses where each line's code starts. Entries
 * are taken in order of their end: a table out of order still means "this
 * line ends here". Of several lines for the same code the first reported
 * wins, as the API documents; code past the region's size is cut off.
 * *out is NULL when the region has no usable lines.
 */
static size_t lines_convert(const LineNumberInfo *table, uint32_t count, uint64_t base, uint32_t size, const char *file, jd_debug_entry **out)
{
	*out = NULL;
	if (count == 0 || size == 0)
		return 0;
	if (count > MAX_LINES) {
		log_once(P_LONG_LINES, "a line table of %u entries was cut to its first %u", count, MAX_LINES);
		count = MAX_LINES;
	}
	LineNumberInfo *raw = malloc((size_t)count * sizeof *raw);
	struct line_in *in = malloc((size_t)count * sizeof *in);
	jd_debug_entry *e = malloc((size_t)count * sizeof *e);
	size_t n = 0;
	if (!raw || !in || !e) {
		log_once(P_NO_MEMORY, "out of memory for a line table; its lines are left out");
		goto out;
	}
	if (read_memory(raw, table, (size_t)count * sizeof *raw) != 0) {
		log_once(P_UNREADABLE_LINES, "a line table at %p (%u entries) is not readable; its lines are left out", (const void *)table, count);
		goto out;
	}
	for (uint32_t i = 0; i < count; i++)
		in[i] = (struct line_in){.end = raw[i].Offset, .line = raw[i].LineNumber, .order = i};
	qsort(in, count, sizeof *in, by_end);
	uint32_t from = 0;
	for (uint32_t i = 0; i < count && from < size; i++) {
		uint32_t end = in[i].end < size ? in[i].end : size;
		if (end <= from)
			continue;
		e[n++] = (jd_debug_entry){.addr = base + from, .line = in[i].line, .file = file};
		from = end;
	}
out:
	free(raw);
	free(in);
	if (n == 0) {
		free(e);
		return 0;
	}
	*out = e;
	return n;
}

/* ---- writing ---- */

/* After a write that did not happen: if the writer has given up (it logged
 * why), so does the collector, instead of keeping its tables for nothing. */
static void writer_failed(void)
{
	if (!jd_active(g.w))
		g.off = 1;
}

/* Copies the region's code into g.code; NULL (zeros in the dump) when the
 * host's address does not hold it. */
static const void *copy_code(const void *addr, size_t size)
{
	if (size > g.code_cap) {
		unsigned char *b = realloc(g.code, size);
		if (!b) {
			log_once(P_NO_MEMORY, "out of memory for %zu bytes of code; written as zeros", size);
			return NULL;
		}
		g.code = b;
		g.code_cap = size;
	}
	if (read_memory(g.code, addr, size) != 0) {
		log_once(P_UNREADABLE_CODE, "the code at %p (%zu bytes) is not readable; written as zeros", addr, size);
		return NULL;
	}
	return g.code;
}

/* Writes region r's CODE_LOAD (its lines before, its inline records after)
 * under a fresh code index. */
static void region_write(struct region *r)
{
	uint64_t index = jd_reserve_index(g.w);
	jd_raw_record *extra = NULL;
	if (r->n_inlines && !(extra = calloc(r->n_inlines, sizeof *extra))) {
		log_once(P_NO_MEMORY, "out of memory; inline records of an updated method are left out");
	}
	for (size_t i = 0; extra && i < r->n_inlines; i++) {
		memcpy(r->inlines[i].payload, &index, sizeof index);
		extra[i] = (jd_raw_record){.id = JD_INLINE_ID, .payload = r->inlines[i].payload, .size = r->inlines[i].size};
	}
	jd_function fn = {
		.name = r->m->name,
		.code_addr = r->start,
		.code_size = r->end - r->start,
		.code = copy_code((const void *)(uintptr_t)r->start, r->end - r->start),
		.lines = r->lines,
		.n_lines = r->n_lines,
		.extra = extra,
		.n_extra = extra ? r->n_inlines : 0,
		.code_index = index,
	};
	if (jd_code_load(g.w, &fn) == 0)
		writer_failed();
	free(extra);
	r->code_index = index;
}

/* ---- events ---- */

/* The fields shared by the three load events and METHOD_UPDATE. */
struct load {
	uint32_t id;
	const char *name, *cls, *file;
	const void *addr;
	uint32_t size, n_lines;
	const LineNumberInfo *lines;
};

/* checked_range validates a region the host reports; 0 when it is unusable. */
static int checked_range(const void *addr, uint32_t size, uint64_t *start, uint64_t *end)
{
	*start = (uint64_t)(uintptr_t)addr;
	*end = *start + size;
	if (!addr || size == 0 || *end < *start) {
		log_once(P_EMPTY_CODE, "an event with code at %p of %u bytes was dropped: no code", addr, size);
		return 0;
	}
	if (size > JD_MAX_CODE) {
		log_once(P_HUGE_CODE, "an event with %u bytes of code was dropped: more than jitdump's %u", size, JD_MAX_CODE);
		return 0;
	}
	return 1;
}

static void on_load(const struct load *l)
{
	uint64_t start, end;
	if (l->id == 0) {
		log_once(P_NO_ID, "a load with method_id 0 was dropped (ids come from iJIT_GetNewMethodID)");
		return;
	}
	if (!checked_range(l->addr, l->size, &start, &end))
		return;
	/* Name and file come from a method's first notification; later ones
	 * with its id add regions (split functions, re-JIT) with their own
	 * lines. */
	struct method *m = method_find(l->id);
	if (!m && !(m = method_add(l->id, l->cls, l->name, l->file))) {
		log_once(P_NO_MEMORY, "out of memory; a method was dropped");
		return;
	}
	size_t at = regions_clear(start, end, m);
	if (g.n_regions == g.cap_regions) {
		size_t cap = g.cap_regions ? 2 * g.cap_regions : 1024;
		struct region *b = realloc(g.regions, cap * sizeof *b);
		if (!b) {
			log_once(P_NO_MEMORY, "out of memory; a method was dropped");
			if (m->regions == 0)
				method_remove(m);
			return;
		}
		g.regions = b;
		g.cap_regions = cap;
	}
	memmove(&g.regions[at + 1], &g.regions[at], (g.n_regions - at) * sizeof *g.regions);
	g.n_regions++;
	struct region *r = &g.regions[at];
	*r = (struct region){.start = start, .end = end, .m = m};
	m->regions++;
	if (m->file)
		r->n_lines = lines_convert(l->lines, l->n_lines, start, l->size, m->file, &r->lines);
	region_write(r);
}

static void on_inline(const iJIT_Method_Inline_Load *in)
{
	uint64_t start, end;
	if (in->method_id == 0 || in->parent_method_id == 0) {
		log_once(P_NO_ID, "an inline load with method_id %u, parent %u was dropped: ids must be nonzero", in->method_id, in->parent_method_id);
		return;
	}
	if (!checked_range(in->method_load_address, in->method_size, &start, &end))
		return;
	struct region *r = region_holding(start, end);
	if (!r) {
		log_once(P_INLINE_ORPHAN, "inline method %u at %p lies in no reported method and was dropped (report the method first)", in->method_id, in->method_load_address);
		return;
	}
	char *name = make_name(in->class_file_name, in->method_name, in->method_id);
	char *file = make_file(in->source_file_name);
	jd_debug_entry *lines = NULL;
	size_t n_lines = lines_convert(in->line_number_table, in->line_number_size, start, in->method_size, file, &lines);
	jd_inline inl = {.code_addr = start, .code_size = end - start, .method_id = in->method_id,
			 .parent_id = in->parent_method_id, .root_id = r->m->id,
			 .lines = lines, .n_lines = n_lines, .name = name, .file = file};
	size_t size = jd_inline_size(&inl);
	unsigned char *p = malloc(size);
	struct inline_rec *recs = realloc(r->inlines, (r->n_inlines + 1) * sizeof *recs);
	if (!name || !p || !recs) {
		log_once(P_NO_MEMORY, "out of memory; an inline method was dropped");
		free(p);
		goto out;
	}
	r->inlines = recs;
	jd_inline_encode(p, r->code_index, &inl);
	r->inlines[r->n_inlines++] = (struct inline_rec){.payload = p, .size = size};
	if (jd_raw(g.w, &(jd_raw_record){.id = JD_INLINE_ID, .payload = p, .size = size}) != 0)
		writer_failed();
out:
	free(name);
	free(file);
	free(lines);
}

/* New code in a range of a reported method: the region holding it is
 * written again (same name, lines and inline records, the current bytes),
 * so code from now on reads as what runs. */
static void on_code_update(const void *addr, uint32_t size)
{
	uint64_t start = (uint64_t)(uintptr_t)addr;
	struct region *r = region_holding(start, start + 1);
	if (!addr || !r) {
		log_once(P_UPDATE_ORPHAN, "an update at %p (%u bytes) lies in no reported method and was dropped", addr, size);
		return;
	}
	region_write(r);
}

static void on_unload(uint32_t id)
{
	struct method *m = method_find(id);
	for (size_t i = 0; m && i < g.n_regions;) {
		if (g.regions[i].m != m) {
			i++;
			continue;
		}
		/* The last region frees m. */
		int last = m->regions == 1;
		region_drop(i, NULL);
		if (last)
			break;
	}
}

static void forget_all(void)
{
	for (size_t i = 0; i < g.n_regions; i++)
		region_free(&g.regions[i]);
	free(g.regions);
	g.regions = NULL;
	g.n_regions = g.cap_regions = 0;
	for (size_t i = 0; i < g.n_buckets; i++)
		for (struct method *m = g.buckets[i], *next; m; m = next) {
			next = m->next;
			free(m->name);
			free(m->file);
			free(m);
		}
	free(g.buckets);
	g.buckets = NULL;
	g.n_buckets = g.n_methods = 0;
	free(g.code);
	g.code = NULL;
	g.code_cap = 0;
}

static void on_shutdown(void)
{
	jd_close(g.w);
	g.closed = 1;
	forget_all();
}

static struct load load_v1(const iJIT_Method_Load *m)
{
	return (struct load){m->method_id, m->method_name, m->class_file_name, m->source_file_name, m->method_load_address, m->method_size, m->line_number_size, m->line_number_table};
}

/* V3 starts with V2's fields. */
static struct load load_v2(const iJIT_Method_Load_V2 *m)
{
	return (struct load){m->method_id, m->method_name, m->class_file_name, m->source_file_name, m->method_load_address, m->method_size, m->line_number_size, m->line_number_table};
}

/* Returns 0 only for event types the API does not define. */
static int dispatch(unsigned int type, void *data)
{
	switch (type) {
	case iJVM_EVENT_TYPE_SHUTDOWN:
		on_shutdown();
		return 1;
	case iJVM_EVENT_TYPE_ENTER_NIDS:
	case iJVM_EVENT_TYPE_LEAVE_NIDS:
		return 1;
	case iJVM_EVENT_TYPE_METHOD_LOAD_FINISHED:
	case iJVM_EVENT_TYPE_METHOD_LOAD_FINISHED_V2:
	case iJVM_EVENT_TYPE_METHOD_LOAD_FINISHED_V3:
	case iJVM_EVENT_TYPE_METHOD_INLINE_LOAD_FINISHED:
	case iJVM_EVENT_TYPE_METHOD_UNLOAD_START:
	case iJVM_EVENT_TYPE_METHOD_UPDATE:
	case iJVM_EVENT_TYPE_METHOD_UPDATE_V2:
		break;
	default:
		log_once(P_UNKNOWN_EVENT, "event type %u is not part of the API; ignored", type);
		return 0;
	}
	if (!data) {
		log_once(P_NULL_DATA, "event %u came with no data and was dropped", type);
		return 1;
	}
	switch (type) {
	case iJVM_EVENT_TYPE_METHOD_LOAD_FINISHED: {
		struct load l = load_v1(data);
		on_load(&l);
		break;
	}
	case iJVM_EVENT_TYPE_METHOD_LOAD_FINISHED_V2:
	case iJVM_EVENT_TYPE_METHOD_LOAD_FINISHED_V3: {
		/* The module and the architecture have no place in jitdump: the
		 * whole dump is one module of the host's architecture. */
		struct load l = load_v2(data);
		on_load(&l);
		break;
	}
	case iJVM_EVENT_TYPE_METHOD_INLINE_LOAD_FINISHED:
		on_inline(data);
		break;
	case iJVM_EVENT_TYPE_METHOD_UNLOAD_START:
		/* Some callers pass a bare unsigned int: read only the id. */
		on_unload(*(const uint32_t *)data);
		break;
	case iJVM_EVENT_TYPE_METHOD_UPDATE: {
		const iJIT_Method_Load *m = data;
		on_code_update(m->method_load_address, m->method_size);
		break;
	}
	case iJVM_EVENT_TYPE_METHOD_UPDATE_V2: {
		const iJIT_Method_Update *u = data;
		/* Data written into a method's range, or a range kept as it was,
		 * changes none of what the dump says about it. */
		if (u->type == iJIT_CT_CODE)
			on_code_update(u->load_address, u->size);
		break;
	}
	}
	return 1;
}

/* A forked child reads its own memory, and writes nothing (the writer
 * knows its parent's pid). */
static void after_fork_in_child(void)
{
	g.pid = getpid();
}

static void open_dump(void)
{
	g.pid = getpid();
	pthread_atfork(NULL, NULL, after_fork_in_child);
	g.w = jd_open(NULL, TAG);
}

/* The dump outlives the host's last event when it never sends SHUTDOWN (PHP
 * does not): close it at exit so that it ends with CODE_CLOSE. */
__attribute__((destructor)) static void close_at_exit(void)
{
	pthread_mutex_lock(&g.mu);
	if (g.w && !g.closed) {
		jd_close(g.w);
		g.closed = 1;
	}
	pthread_mutex_unlock(&g.mu);
}

static int active(void)
{
	pthread_once(&g.once, open_dump);
	return g.w && !g.closed && !g.off;
}

unsigned int Initialize(void)
{
	pthread_mutex_lock(&g.mu);
	int on = active();
	pthread_mutex_unlock(&g.mu);
	return on ? iJIT_SAMPLING_ON : iJIT_NOTHING_RUNNING;
}

unsigned int NotifyEvent(unsigned int event_type, void *event_data)
{
	pthread_mutex_lock(&g.mu);
	int rc = active() ? dispatch(event_type, event_data) : 1;
	pthread_mutex_unlock(&g.mu);
	return (unsigned int)rc;
}

int iJIT_NotifyEvent(iJIT_JVM_EVENT event_type, void *event_data)
{
	return (int)NotifyEvent((unsigned int)event_type, event_data);
}

iJIT_IsProfilingActiveFlags iJIT_IsProfilingActive(void)
{
	return (iJIT_IsProfilingActiveFlags)Initialize();
}

unsigned int iJIT_GetNewMethodID(void)
{
	unsigned int id = __atomic_load_n(&next_method_id, __ATOMIC_RELAXED);
	do {
		if (id == 0)
			return 0; /* all used: 0 is the API's "none left" */
	} while (!__atomic_compare_exchange_n(&next_method_id, &id, id + 1, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
	return id;
}
