/*
 * jitprof's JVMTI agent: writes a jitdump of the code HotSpot generates.
 *
 *   java -agentpath:/path/libjitprof-jvmti.so[=dir=/out,verbose] ...
 *   jcmd <pid> JVMTI.agent_load /path/libjitprof-jvmti.so [/out[,verbose]]
 *
 * Compiled methods are named as perf's agent names them, class signature +
 * method name + method signature (LWork;fib(I)J), which jitprof report and
 * perf demangle. Their DEBUG_INFO comes from the inline records of the
 * compile info; stubs and the interpreter come from DynamicCodeGenerated.
 * Loaded into a running JVM, the agent asks for the methods and stubs
 * generated before it came.
 *
 * It never harms the JVM: any failure is logged once, prefixed
 * "jitprof-jvmti:", and the agent stops writing.
 */
#define _GNU_SOURCE
#include <jvmti.h>
#include <jvmticmlr.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "jitdump_writer.h"

#define TAG "jitprof-jvmti"

/* Bounds on what the JVM hands over, so corrupt compile info cannot make
 * the agent loop for ever or allocate without end. */
#define MAX_CMLR_RECORDS 64
#define MAX_PCS 4000000
#define MAX_FRAMES 4096

static jd_writer *dump;
static int verbose;
static unsigned long n_methods, n_lines, n_stubs, n_unloads;
/* Time spent in CompiledMethodLoad, for the verbose summary: the agent's
 * cost per compiled method, measured where it is paid. */
static unsigned long load_ns;

static unsigned long now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (unsigned long)ts.tv_sec * 1000000000ul + (unsigned long)ts.tv_nsec;
}

static void count(unsigned long *c, unsigned long n)
{
	__atomic_fetch_add(c, n, __ATOMIC_RELAXED);
}

static void deallocate(jvmtiEnv *jvmti, void *p)
{
	if (p)
		(*jvmti)->Deallocate(jvmti, (unsigned char *)p);
}

/* What a method contributes to names and line tables, resolved once per
 * event however many PC records mention it. */
typedef struct {
	jmethodID method;
	char *name; /* Lpkg/Class;method(sig)ret, malloc'd; NULL if unknown */
	char *file; /* pkg/SourceFile, malloc'd; NULL if unknown */
	jvmtiLineNumberEntry *lines; /* sorted by start_location; JVMTI memory */
	jint n_lines;
} method_info;

typedef struct {
	method_info *slots; /* open addressing on the jmethodID */
	size_t cap;         /* a power of two */
	size_t used;
} method_cache;

static int by_location(const void *a, const void *b)
{
	jlocation x = ((const jvmtiLineNumberEntry *)a)->start_location;
	jlocation y = ((const jvmtiLineNumberEntry *)b)->start_location;
	return (x > y) - (x < y);
}

static char *concat3(const char *a, const char *b, const char *c)
{
	size_t la = strlen(a), lb = strlen(b), lc = strlen(c);
	char *s = malloc(la + lb + lc + 1);
	if (!s)
		return NULL;
	memcpy(s, a, la);
	memcpy(s + la, b, lb);
	memcpy(s + la + lb, c, lc + 1);
	return s;
}

/* pkg/ + the SourceFile attribute; a class without one (generated code) is
 * named after its outermost class, where javac would have put it. */
static char *source_file(jvmtiEnv *jvmti, jclass klass, const char *csig)
{
	const char *cls = csig;
	size_t len = strlen(cls);
	if (len >= 2 && cls[0] == 'L' && cls[len - 1] == ';') {
		cls++;
		len -= 2;
	}
	size_t pkg = 0;
	for (size_t i = 0; i < len; i++)
		if (cls[i] == '/')
			pkg = i + 1;

	char *src = NULL;
	char *file = NULL;
	if ((*jvmti)->GetSourceFileName(jvmti, klass, &src) == JVMTI_ERROR_NONE && src && *src) {
		char *dir = strndup(cls, pkg);
		if (dir)
			file = concat3(dir, src, "");
		free(dir);
	} else {
		size_t end = pkg;
		while (end < len && cls[end] != '$')
			end++;
		char *outer = strndup(cls, end);
		if (outer)
			file = concat3(outer, ".java", "");
		free(outer);
	}
	deallocate(jvmti, src);
	return file;
}

static void resolve(jvmtiEnv *jvmti, method_info *mi, int want_lines)
{
	jclass klass = NULL;
	char *csig = NULL, *mname = NULL, *msig = NULL;
	if ((*jvmti)->GetMethodDeclaringClass(jvmti, mi->method, &klass) != JVMTI_ERROR_NONE ||
	    (*jvmti)->GetClassSignature(jvmti, klass, &csig, NULL) != JVMTI_ERROR_NONE || !csig)
		goto out;
	if ((*jvmti)->GetMethodName(jvmti, mi->method, &mname, &msig, NULL) == JVMTI_ERROR_NONE && mname && msig)
		mi->name = concat3(csig, mname, msig);
	if (!want_lines)
		goto out;
	/* Native and abstract methods and classes compiled without -g have no
	 * line table: no error, just no lines. */
	if ((*jvmti)->GetLineNumberTable(jvmti, mi->method, &mi->n_lines, &mi->lines) != JVMTI_ERROR_NONE ||
	    mi->n_lines <= 0 || !mi->lines) {
		deallocate(jvmti, mi->lines);
		mi->lines = NULL;
		mi->n_lines = 0;
		goto out;
	}
	qsort(mi->lines, (size_t)mi->n_lines, sizeof *mi->lines, by_location);
	mi->file = source_file(jvmti, klass, csig);
out:
	deallocate(jvmti, csig);
	deallocate(jvmti, mname);
	deallocate(jvmti, msig);
	/* The class reference is local to the callback's JNI frame, which the
	 * JVM pops when the callback returns. */
}

static method_info *lookup(jvmtiEnv *jvmti, method_cache *c, jmethodID m)
{
	if (c->used * 2 >= c->cap) {
		size_t cap = c->cap ? c->cap * 2 : 16;
		method_info *slots = calloc(cap, sizeof *slots);
		if (!slots)
			return NULL;
		for (size_t i = 0; i < c->cap; i++) {
			if (!c->slots[i].method)
				continue;
			size_t j = ((uintptr_t)c->slots[i].method >> 3) & (cap - 1);
			while (slots[j].method)
				j = (j + 1) & (cap - 1);
			slots[j] = c->slots[i];
		}
		free(c->slots);
		c->slots = slots;
		c->cap = cap;
	}
	size_t j = ((uintptr_t)m >> 3) & (c->cap - 1);
	while (c->slots[j].method && c->slots[j].method != m)
		j = (j + 1) & (c->cap - 1);
	method_info *mi = &c->slots[j];
	if (!mi->method) {
		mi->method = m;
		c->used++;
		resolve(jvmti, mi, 1);
	}
	return mi;
}

static void cache_free(jvmtiEnv *jvmti, method_cache *c)
{
	for (size_t i = 0; i < c->cap; i++) {
		free(c->slots[i].name);
		free(c->slots[i].file);
		deallocate(jvmti, c->slots[i].lines);
	}
	free(c->slots);
}

/* The line of bci: the entry with the greatest start_location <= bci. A
 * negative bci (method entry, synchronization) takes the first line. */
static jint line_of(const method_info *mi, jint bci)
{
	jint lo = 0, hi = mi->n_lines; /* find the first entry past bci */
	while (lo < hi) {
		jint mid = lo + (hi - lo) / 2;
		if (mi->lines[mid].start_location <= bci)
			lo = mid + 1;
		else
			hi = mid;
	}
	return mi->lines[lo > 0 ? lo - 1 : 0].line_number;
}

typedef struct {
	const void *pc;
	const PCStackInfo *info;
} pc_ref;

static int by_pc(const void *a, const void *b)
{
	uintptr_t x = (uintptr_t)((const pc_ref *)a)->pc, y = (uintptr_t)((const pc_ref *)b)->pc;
	return (x > y) - (x < y);
}

static const jvmtiCompiledMethodLoadInlineRecord *inline_record(const void *compile_info)
{
	const jvmtiCompiledMethodLoadRecordHeader *h = compile_info;
	for (int i = 0; h && i < MAX_CMLR_RECORDS; i++, h = h->next)
		if (h->kind == JVMTI_CMLR_INLINE_INFO)
			return (const jvmtiCompiledMethodLoadInlineRecord *)h;
	return NULL;
}

/*
 * Builds the line table of a compiled method from its PC records.
 *
 * A PC record's pc is where execution resumes after the call or safepoint
 * poll it describes (HotSpot records the offset after the instruction), so
 * the code that leads up to it, from the previous record's pc, belongs to
 * its bytecode: each entry starts at the previous pc. perf's agent starts
 * the entry at the pc itself and so gives the code before a call the line
 * of the call before. Samples on return addresses stay right because
 * reports look up a caller's address minus one.
 *
 * Each PC lists its frames innermost first; the entry takes the innermost
 * frame with a line table, as DWARF line tables and perf do: the line whose
 * code runs, which may be in an inlined callee's file.
 *
 * Returns the number of entries in *out (malloc'd), 0 if none.
 */
static size_t method_line(const method_info *root, uint64_t start, jd_debug_entry **out);

static size_t line_table(jvmtiEnv *jvmti, method_cache *cache, const method_info *root, uint64_t start,
			 uint64_t size, const void *compile_info, jd_debug_entry **out)
{
	*out = NULL;
	const jvmtiCompiledMethodLoadInlineRecord *rec = inline_record(compile_info);
	if (!rec || rec->numpcs <= 0 || !rec->pcinfo)
		return method_line(root, start, out);
	if (rec->numpcs > MAX_PCS) {
		jd_disable(dump, "the JVM's compile info has an absurd number of PC records");
		return 0;
	}
	size_t n = (size_t)rec->numpcs;
	pc_ref *pcs = malloc(n * sizeof *pcs);
	jd_debug_entry *e = malloc(n * sizeof *e);
	if (!pcs || !e) {
		free(pcs);
		free(e);
		return 0;
	}
	size_t npc = 0;
	for (size_t i = 0; i < n; i++) {
		uint64_t pc = (uintptr_t)rec->pcinfo[i].pc;
		/* A pc at the start ends an empty range; one past the end
		 * belongs to the stubs after the code. */
		if (pc > start && pc <= start + size)
			pcs[npc++] = (pc_ref){rec->pcinfo[i].pc, &rec->pcinfo[i]};
	}
	qsort(pcs, npc, sizeof *pcs, by_pc);

	size_t ne = 0;
	uint64_t from = start;
	for (size_t i = 0; i < npc; i++) {
		const PCStackInfo *p = pcs[i].info;
		if (p->numstackframes <= 0 || p->numstackframes > MAX_FRAMES || !p->methods || !p->bcis)
			continue;
		const method_info *mi = NULL;
		jint bci = 0;
		for (jint f = 0; f < p->numstackframes && !mi; f++) {
			if (!p->methods[f])
				continue;
			const method_info *m = lookup(jvmti, cache, p->methods[f]);
			if (m && m->n_lines > 0 && m->file) {
				mi = m;
				bci = p->bcis[f];
			}
		}
		if (!mi)
			continue;
		uint32_t line = (uint32_t)line_of(mi, bci);
		if (ne > 0 && e[ne - 1].addr == from)
			ne--; /* the previous range was empty */
		if (ne == 0 || e[ne - 1].line != line || strcmp(e[ne - 1].file, mi->file) != 0)
			e[ne++] = (jd_debug_entry){.addr = from, .line = line, .file = mi->file};
		from = (uintptr_t)pcs[i].pc;
	}
	free(pcs);
	if (ne == 0) {
		free(e);
		return 0;
	}
	*out = e;
	return ne;
}

/*
 * The JVM gives no PC records for code without safepoints, nor for many
 * methods GenerateEvents replays to an agent attached late (HotSpot 17 and
 * 25 pass numpcs 0 for them). Such code still belongs to its method: one
 * entry, the method's first line, lets reports name its file and line
 * rather than nothing.
 */
static size_t method_line(const method_info *root, uint64_t start, jd_debug_entry **out)
{
	if (!root || root->n_lines <= 0 || !root->file || !(*out = malloc(sizeof **out)))
		return 0;
	**out = (jd_debug_entry){.addr = start, .line = (uint32_t)line_of(root, -1), .file = root->file};
	return 1;
}

static void JNICALL compiled_method_load(jvmtiEnv *jvmti, jmethodID method, jint code_size, const void *code_addr,
					  jint map_length, const jvmtiAddrLocationMap *map, const void *compile_info)
{
	(void)map_length;
	(void)map;
	if (!jd_active(dump) || !method || !code_addr || code_size <= 0)
		return;
	unsigned long begin = now_ns();
	method_cache cache = {0};
	method_info *mi = lookup(jvmti, &cache, method);
	if (mi && mi->name) {
		jd_function fn = {
			.name = mi->name,
			.code_addr = (uintptr_t)code_addr,
			.code_size = (uint64_t)code_size,
			.code = code_addr,
		};
		jd_debug_entry *lines;
		fn.n_lines = line_table(jvmti, &cache, mi, fn.code_addr, fn.code_size, compile_info, &lines);
		fn.lines = lines;
		if (jd_code_load(dump, &fn)) {
			count(&n_methods, 1);
			count(&n_lines, fn.n_lines);
		}
		free(lines);
	}
	cache_free(jvmti, &cache);
	count(&load_ns, now_ns() - begin);
}

/* jitdump has no unload record, and perf and jitprof give an address to the
 * latest CODE_LOAD covering it, so freed code needs no record: HotSpot's
 * next load at the same address supersedes it. The count tells users how
 * much code churned. */
static void JNICALL compiled_method_unload(jvmtiEnv *jvmti, jmethodID method, const void *code_addr)
{
	(void)jvmti;
	(void)method;
	(void)code_addr;
	count(&n_unloads, 1);
}

static void JNICALL dynamic_code_generated(jvmtiEnv *jvmti, const char *name, const void *address, jint length)
{
	(void)jvmti;
	if (!address || length <= 0)
		return;
	jd_function fn = {
		.name = name,
		.code_addr = (uintptr_t)address,
		.code_size = (uint64_t)length,
		.code = address,
	};
	if (jd_code_load(dump, &fn))
		count(&n_stubs, 1);
}

static void finish(void)
{
	static int finished;
	if (!dump || __atomic_exchange_n(&finished, 1, __ATOMIC_ACQ_REL))
		return;
	if (verbose)
		fprintf(stderr, TAG ": %lu compiled methods (%lu line entries, %lu ns in the agent), %lu stubs, %lu unloads written to %s\n",
			__atomic_load_n(&n_methods, __ATOMIC_RELAXED), __atomic_load_n(&n_lines, __ATOMIC_RELAXED),
			__atomic_load_n(&load_ns, __ATOMIC_RELAXED),
			__atomic_load_n(&n_stubs, __ATOMIC_RELAXED), __atomic_load_n(&n_unloads, __ATOMIC_RELAXED),
			jd_path(dump));
	jd_close(dump);
}

static void JNICALL vm_death(jvmtiEnv *jvmti, JNIEnv *jni)
{
	(void)jvmti;
	(void)jni;
	finish();
}

/* Options, comma-separated: dir=PATH (the dump's directory; default
 * $JITDUMPDIR, else a new directory under ~/.debug/jit) and verbose (a
 * summary on stderr at exit). An absolute path alone is taken as the
 * directory too: jcmd's parser keeps "dir=" for itself and passes on only
 * "dir". Returns the directory, malloc'd, or NULL. */
static char *parse_options(const char *options)
{
	char *dir = NULL;
	if (!options)
		return NULL;
	char *copy = strdup(options);
	if (!copy)
		return NULL;
	char *save = NULL;
	for (char *opt = strtok_r(copy, ",", &save); opt; opt = strtok_r(NULL, ",", &save)) {
		if (strncmp(opt, "dir=", 4) == 0 || opt[0] == '/') {
			free(dir);
			dir = strdup(opt[0] == '/' ? opt : opt + 4);
		} else if (strcmp(opt, "verbose") == 0) {
			verbose = 1;
		} else if (*opt) {
			fprintf(stderr, TAG ": unknown option %s ignored (known: dir=PATH, /PATH, verbose)\n", opt);
		}
	}
	free(copy);
	return dir;
}

static int start(JavaVM *vm, char *options, int attaching)
{
	if (dump) {
		/* jcmd loaded the agent again: the JVM keeps one copy of the
		 * library, so the dump being written goes on. */
		fprintf(stderr, TAG ": already writing %s\n", jd_path(dump));
		return 0;
	}
	jvmtiEnv *jvmti = NULL;
	if ((*vm)->GetEnv(vm, (void **)&jvmti, JVMTI_VERSION_1_2) != JNI_OK || !jvmti) {
		fprintf(stderr, TAG ": this JVM offers no JVMTI 1.2; no jitdump is written\n");
		return 0;
	}
	jvmtiCapabilities potential = {0}, caps = {0};
	(*jvmti)->GetPotentialCapabilities(jvmti, &potential);
	if (!potential.can_generate_compiled_method_load_events) {
		fprintf(stderr, TAG ": the JVM cannot report compiled methods; no jitdump is written\n");
		return 0;
	}
	caps.can_generate_compiled_method_load_events = 1;
	caps.can_get_line_numbers = potential.can_get_line_numbers;
	caps.can_get_source_file_name = potential.can_get_source_file_name;
	if ((*jvmti)->AddCapabilities(jvmti, &caps) != JVMTI_ERROR_NONE) {
		fprintf(stderr, TAG ": the JVM refused the capabilities; no jitdump is written\n");
		return 0;
	}

	char *dir = parse_options(options);
	dump = jd_open(dir, TAG);
	free(dir);
	if (!dump)
		return 0; /* jd_open said why */

	jvmtiEventCallbacks cb = {0};
	cb.CompiledMethodLoad = compiled_method_load;
	cb.CompiledMethodUnload = compiled_method_unload;
	cb.DynamicCodeGenerated = dynamic_code_generated;
	cb.VMDeath = vm_death;
	static const jvmtiEvent events[] = {JVMTI_EVENT_COMPILED_METHOD_LOAD, JVMTI_EVENT_COMPILED_METHOD_UNLOAD,
					    JVMTI_EVENT_DYNAMIC_CODE_GENERATED, JVMTI_EVENT_VM_DEATH};
	if ((*jvmti)->SetEventCallbacks(jvmti, &cb, sizeof cb) != JVMTI_ERROR_NONE) {
		jd_disable(dump, "the JVM refused the event callbacks");
		return 0;
	}
	for (size_t i = 0; i < sizeof events / sizeof *events; i++)
		if ((*jvmti)->SetEventNotificationMode(jvmti, JVMTI_ENABLE, events[i], NULL) != JVMTI_ERROR_NONE) {
			jd_disable(dump, "the JVM refused an event");
			return 0;
		}
	if (attaching) {
		/* Replays what was generated before the agent came, on this
		 * thread, through the callbacks above. */
		if ((*jvmti)->GenerateEvents(jvmti, JVMTI_EVENT_DYNAMIC_CODE_GENERATED) != JVMTI_ERROR_NONE ||
		    (*jvmti)->GenerateEvents(jvmti, JVMTI_EVENT_COMPILED_METHOD_LOAD) != JVMTI_ERROR_NONE)
			fprintf(stderr, TAG ": the JVM did not replay its earlier code; only code compiled from now on is named\n");
	}
	if (verbose)
		fprintf(stderr, TAG ": writing %s\n", jd_path(dump));
	return 0;
}

JNIEXPORT jint JNICALL Agent_OnLoad(JavaVM *vm, char *options, void *reserved)
{
	(void)reserved;
	return start(vm, options, 0);
}

JNIEXPORT jint JNICALL Agent_OnAttach(JavaVM *vm, char *options, void *reserved)
{
	(void)reserved;
	return start(vm, options, 1);
}

JNIEXPORT void JNICALL Agent_OnUnload(JavaVM *vm)
{
	(void)vm;
	finish();
}
