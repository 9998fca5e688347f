/*
 * jitprof's JVMTI agent: writes a jitdump of the code HotSpot generates.
 *
 *   java -agentpath:/path/libjitprof-jvmti.so[=dir=/out,verbose] ...
 *   jcmd <pid> JVMTI.agent_load /path/libjitprof-jvmti.so [/out[,verbose]]
 *
 * Compiled methods are named as perf's agent names them, class signature +
 * method name + method signature (LWork;fib(I)J), which jitprof report and
 * perf demangle. The compile info's PC records give each method's own lines
 * (DEBUG_INFO) and the methods inlined into it (jitprof's JITPROF_INLINE
 * records, which perf skips); stubs and the interpreter come from
 * DynamicCodeGenerated.
 * Loaded into a running JVM, the agent asks for the methods and stubs
 * generated before it came.
 * Each class's methods are named by the address of their Method* (jitprof's
 * JITPROF_METHODS records, one per class: those loaded when the agent
 * starts, then each class prepared), so that jitprof can name the method an
 * interpreted frame runs, which the frame holds.
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
/* Inlining deeper than this is folded into its caller; HotSpot's
 * MaxInlineLevel is 15. */
#define MAX_INLINE_DEPTH 32
/* The bytes of inline records a method may add to the dump: 16 times its
 * code's size, and 32 KiB for any method. Each instance repeats its name and
 * file (100 bytes and more for the JDK's methods); C2's code of the Inline
 * workload's mapWork, 2.8 KB, takes 200 instances over 5 levels, 33 KB. */
#define INLINE_BUDGET(code_size) ((code_size) * 16 > 32768 ? (code_size) * 16 : 32768)
/* The compiled method's id in its inline records; instances count from 2. */
#define ROOT_ID 1u
#define JD_RECORD_HEADER 16u
/* jitprof's record naming a class's methods by their Method* (layout in
 * jitdump/methods.go). */
#define JITPROF_METHODS_ID 0x4A500002u

static jd_writer *dump;
static int verbose;
static unsigned long n_methods, n_lines, n_stubs, n_unloads;
/* Inline records written, their bytes, and methods whose deepest levels
 * did not fit the budget. */
static unsigned long n_inlines, inline_bytes, n_cut;
/* Time spent in CompiledMethodLoad, for the verbose summary: the agent's
 * cost per compiled method, measured where it is paid. */
static unsigned long load_ns;
/* JITPROF_METHODS records: whether they are written (the option nomethods
 * turns them off), how many, of how many methods and bytes, and the time
 * spent making them. */
static int write_methods = 1;
static unsigned long n_method_recs, n_named, method_bytes, methods_ns;

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
	method_info **slots; /* open addressing on the jmethodID */
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

/* The method's info, resolved on first sight. Infos stay where they are
 * while the table grows: the inline instances hold them. */
static method_info *lookup(jvmtiEnv *jvmti, method_cache *c, jmethodID m)
{
	if (c->used * 2 >= c->cap) {
		size_t cap = c->cap ? c->cap * 2 : 16;
		method_info **slots = calloc(cap, sizeof *slots);
		if (!slots)
			return NULL;
		for (size_t i = 0; i < c->cap; i++) {
			if (!c->slots[i])
				continue;
			size_t j = ((uintptr_t)c->slots[i]->method >> 3) & (cap - 1);
			while (slots[j])
				j = (j + 1) & (cap - 1);
			slots[j] = c->slots[i];
		}
		free(c->slots);
		c->slots = slots;
		c->cap = cap;
	}
	size_t j = ((uintptr_t)m >> 3) & (c->cap - 1);
	while (c->slots[j] && c->slots[j]->method != m)
		j = (j + 1) & (c->cap - 1);
	if (!c->slots[j]) {
		method_info *mi = calloc(1, sizeof *mi);
		if (!mi)
			return NULL;
		mi->method = m;
		resolve(jvmti, mi, 1);
		c->slots[j] = mi;
		c->used++;
	}
	return c->slots[j];
}

static void cache_free(jvmtiEnv *jvmti, method_cache *c)
{
	for (size_t i = 0; i < c->cap; i++) {
		if (!c->slots[i])
			continue;
		free(c->slots[i]->name);
		free(c->slots[i]->file);
		deallocate(jvmti, c->slots[i]->lines);
		free(c->slots[i]);
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

/* An instance of a method inlined into the compiled one, as it is built. */
typedef struct {
	const method_info *mi;
	jint call_bci; /* where its caller calls it: with the callers', its identity */
	int level;     /* 1: inlined straight into the compiled method */
	uint32_t id, parent;
	uint64_t start, end;
	jd_debug_entry *lines;
	size_t n_lines, cap;
} instance;

/* What a compiled method's PC records give: its own line table (DEBUG_INFO)
 * and the tree of the methods inlined into it (JITPROF_INLINE records). */
typedef struct {
	jd_debug_entry *lines;
	size_t n_lines;
	instance *inl;
	size_t n_inl, cap_inl;
	int failed; /* out of memory: what was built is dropped */
} method_lines;

static void method_lines_free(method_lines *ml)
{
	free(ml->lines);
	for (size_t i = 0; i < ml->n_inl; i++)
		free(ml->inl[i].lines);
	free(ml->inl);
}

/* Appends (addr, line) to a table unless the line goes on as it was. */
static int add_line(jd_debug_entry **lines, size_t *n, size_t *cap, uint64_t addr, uint32_t line, const char *file)
{
	if (*n > 0 && (*lines)[*n - 1].line == line)
		return 0;
	if (*n == *cap) {
		size_t c = *cap ? *cap * 2 : 4;
		jd_debug_entry *l = realloc(*lines, c * sizeof *l);
		if (!l)
			return -1;
		*lines = l;
		*cap = c;
	}
	(*lines)[(*n)++] = (jd_debug_entry){.addr = addr, .line = line, .file = file};
	return 0;
}

/*
 * The JVM gives no PC records for code without safepoints, nor for many
 * methods GenerateEvents replays to an agent attached late (HotSpot 17 and
 * 25 pass numpcs 0 for them). Such code still belongs to its method: one
 * entry, the method's first line, lets reports name its file and line
 * rather than nothing.
 */
static void method_line(const method_info *root, uint64_t start, method_lines *ml)
{
	if (!root || root->n_lines <= 0 || !root->file || !(ml->lines = malloc(sizeof *ml->lines)))
		return;
	ml->lines[0] = (jd_debug_entry){.addr = start, .line = (uint32_t)line_of(root, -1), .file = root->file};
	ml->n_lines = 1;
}

/*
 * Builds a compiled method's lines from its PC records.
 *
 * A PC record's pc is where execution resumes after the call or safepoint
 * poll it describes (HotSpot records the offset after the instruction), so
 * the code that leads up to it, from the previous record's pc, belongs to
 * its bytecode: each range starts at the previous pc. perf's agent starts
 * the entry at the pc itself and so gives the code before a call the line
 * of the call before. Samples on return addresses stay right because
 * reports look up a caller's address minus one.
 *
 * Each PC lists its frames innermost first, the compiled method last. The
 * method's own line table takes the last frame's line: where it calls the
 * outermost inlined method, as DWARF's call_line does, so that folding the
 * inlined frames back leaves the method's own line. Each inlined frame is
 * an instance (same method, called from the same bytecode by the same
 * chain of callers) over a run of consecutive ranges, with its own lines:
 * every instance but the innermost names the line of its call below. C2
 * interleaves the code of inlined methods, so one inlined call may take
 * several instances, one per run.
 */
static void build_lines(jvmtiEnv *jvmti, method_cache *cache, const method_info *root, uint64_t start,
			uint64_t size, const void *compile_info, method_lines *ml)
{
	*ml = (method_lines){0};
	const jvmtiCompiledMethodLoadInlineRecord *rec = inline_record(compile_info);
	if (!rec || rec->numpcs <= 0 || !rec->pcinfo) {
		method_line(root, start, ml);
		return;
	}
	if (rec->numpcs > MAX_PCS) {
		jd_disable(dump, "the JVM's compile info has an absurd number of PC records");
		return;
	}
	size_t n = (size_t)rec->numpcs;
	pc_ref *pcs = malloc(n * sizeof *pcs);
	if (!pcs) {
		ml->failed = 1;
		return;
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

	size_t cap_lines = 0;
	size_t open[MAX_INLINE_DEPTH + 1]; /* open[d]: the instance at level d, an index into ml->inl */
	int depth = 0;
	uint32_t next_id = ROOT_ID + 1;
	uint64_t from = start;
	for (size_t i = 0; i < npc && !ml->failed; i++) {
		const PCStackInfo *p = pcs[i].info;
		uint64_t pc = (uintptr_t)pcs[i].pc;
		if (pc == from || p->numstackframes <= 0 || p->numstackframes > MAX_FRAMES || !p->methods || !p->bcis)
			continue;
		jint nf = p->numstackframes;
		const method_info *m[MAX_INLINE_DEPTH + 1];
		int levels = 0; /* inlined levels kept: the deepest are folded into their caller */
		int ok = 1;
		for (jint f = nf - 1; f >= 0 && levels <= MAX_INLINE_DEPTH; f--, levels++)
			if (!p->methods[f] || !(m[levels] = lookup(jvmti, cache, p->methods[f])))
				ok = 0;
		if (!ok)
			continue;
		levels--;
		if (m[0]->n_lines > 0 && m[0]->file &&
		    add_line(&ml->lines, &ml->n_lines, &cap_lines, from, (uint32_t)line_of(m[0], p->bcis[nf - 1]), m[0]->file) != 0)
			ml->failed = 1;
		/* Level d is frame nf-1-d; its caller's bci at frame nf-d is where it was called. */
		int same = 0;
		while (same < depth && same < levels && ml->inl[open[same + 1]].mi == m[same + 1] &&
		       ml->inl[open[same + 1]].call_bci == p->bcis[nf - 1 - same])
			same++;
		for (int d = same + 1; d <= depth; d++)
			ml->inl[open[d]].end = from;
		depth = same;
		for (int d = 1; d <= levels && !ml->failed; d++) {
			if (d > depth) {
				if (ml->n_inl == ml->cap_inl) {
					size_t c = ml->cap_inl ? ml->cap_inl * 2 : 16;
					instance *in = realloc(ml->inl, c * sizeof *in);
					if (!in) {
						ml->failed = 1;
						break;
					}
					ml->inl = in;
					ml->cap_inl = c;
				}
				open[d] = ml->n_inl++;
				ml->inl[open[d]] = (instance){.mi = m[d], .call_bci = p->bcis[nf - d], .level = d,
							      .id = next_id++, .parent = d == 1 ? ROOT_ID : ml->inl[open[d - 1]].id,
							      .start = from};
				depth = d;
			}
			instance *in = &ml->inl[open[d]];
			if (m[d]->n_lines > 0 &&
			    add_line(&in->lines, &in->n_lines, &in->cap, from, (uint32_t)line_of(m[d], p->bcis[nf - 1 - d]), NULL) != 0)
				ml->failed = 1;
		}
		from = pc;
	}
	for (int d = 1; d <= depth; d++)
		ml->inl[open[d]].end = from;
	free(pcs);
	if (ml->failed) {
		method_lines_free(ml);
		*ml = (method_lines){0};
	}
}

/*
 * The inline records of a method within its budget: the instances of the
 * outermost levels, as many levels as fit. A deeper level is dropped whole,
 * so its code counts to its caller, at the line of the call. C2 may inline
 * 15 levels deep and interleave them over thousands of PC records; the
 * budget keeps the dump within a small multiple of the code.
 *
 * Returns the records, their payloads in one allocation at (*out)[0].payload,
 * and their count in *n; NULL when there are none.
 */
static jd_raw_record *inline_records(const method_lines *ml, uint64_t code_index, uint64_t code_size, size_t *n)
{
	*n = 0;
	if (ml->n_inl == 0)
		return NULL;
	size_t by_level[MAX_INLINE_DEPTH + 1] = {0};
	jd_inline *enc = malloc(ml->n_inl * sizeof *enc);
	if (!enc)
		return NULL;
	for (size_t i = 0; i < ml->n_inl; i++) {
		const instance *in = &ml->inl[i];
		enc[i] = (jd_inline){.code_addr = in->start, .code_size = in->end - in->start, .method_id = in->id,
				     .parent_id = in->parent, .root_id = ROOT_ID, .lines = in->lines, .n_lines = in->n_lines,
				     .name = in->mi->name, .file = in->mi->file};
		by_level[in->level] += JD_RECORD_HEADER + jd_inline_size(&enc[i]);
	}
	uint64_t budget = INLINE_BUDGET(code_size), total = 0;
	int levels = 0;
	while (levels < MAX_INLINE_DEPTH && by_level[levels + 1] && total + by_level[levels + 1] <= budget)
		total += by_level[++levels];
	if (levels < MAX_INLINE_DEPTH && by_level[levels + 1])
		count(&n_cut, 1);
	size_t keep = 0;
	for (size_t i = 0; i < ml->n_inl; i++)
		keep += ml->inl[i].level <= levels;
	jd_raw_record *recs = keep ? malloc(keep * sizeof *recs) : NULL;
	unsigned char *buf = keep ? malloc(total) : NULL;
	if (!recs || !buf) {
		free(recs);
		free(buf);
		free(enc);
		return NULL;
	}
	unsigned char *p = buf;
	for (size_t i = 0; i < ml->n_inl; i++) {
		if (ml->inl[i].level > levels)
			continue;
		size_t size = jd_inline_size(&enc[i]);
		jd_inline_encode(p, code_index, &enc[i]);
		recs[(*n)++] = (jd_raw_record){.id = JD_INLINE_ID, .payload = p, .size = size};
		p += size;
	}
	free(enc);
	return recs;
}

/*
 * Writes the JITPROF_METHODS record of klass: each method's Method*, which
 * HotSpot's jmethodID points to (a jmethodID is the address of a slot
 * holding the Method*, which the JVM updates if the method is redefined),
 * with its name and signature. A class not prepared yet has no methods to
 * give: its ClassPrepare event comes later.
 */
static void write_class_methods(jvmtiEnv *jvmti, jclass klass)
{
	if (!write_methods || !jd_active(dump))
		return;
	unsigned long begin = now_ns();
	jint status = 0;
	char *csig = NULL;
	jint n = 0;
	jmethodID *methods = NULL;
	char **names = NULL;
	unsigned char *payload = NULL;
	if ((*jvmti)->GetClassStatus(jvmti, klass, &status) != JVMTI_ERROR_NONE || !(status & JVMTI_CLASS_STATUS_PREPARED) ||
	    (status & (JVMTI_CLASS_STATUS_ARRAY | JVMTI_CLASS_STATUS_PRIMITIVE)) ||
	    (*jvmti)->GetClassSignature(jvmti, klass, &csig, NULL) != JVMTI_ERROR_NONE || !csig ||
	    (*jvmti)->GetClassMethods(jvmti, klass, &n, &methods) != JVMTI_ERROR_NONE || n <= 0 || !methods)
		goto out;
	if (!(names = calloc((size_t)n, sizeof *names)))
		goto out;
	size_t size = 8 + 8 * (size_t)n + strlen(csig) + 1;
	jint named = 0;
	for (jint i = 0; i < n; i++) {
		char *mname = NULL, *msig = NULL;
		if (methods[i] && (*jvmti)->GetMethodName(jvmti, methods[i], &mname, &msig, NULL) == JVMTI_ERROR_NONE && mname &&
		    msig && (names[i] = concat3(mname, msig, ""))) {
			size += 8 + strlen(names[i]) + 1;
			named++;
		}
		deallocate(jvmti, mname);
		deallocate(jvmti, msig);
	}
	size = (size + 7) & ~(size_t)7;
	if (named == 0 || !(payload = calloc(1, size)))
		goto out;
	uint32_t head[2] = {(uint32_t)named, 0};
	memcpy(payload, head, sizeof head);
	unsigned char *ids = payload + 8, *text = ids + 8 * (size_t)named;
	size_t len = strlen(csig) + 1;
	memcpy(text, csig, len);
	text += len;
	for (jint i = 0; i < n; i++) {
		if (!names[i])
			continue;
		uint64_t method = (uintptr_t) * (void *const *)methods[i];
		memcpy(ids, &method, 8);
		ids += 8;
		len = strlen(names[i]) + 1;
		memcpy(text, names[i], len);
		text += len;
	}
	jd_raw_record rec = {.id = JITPROF_METHODS_ID, .payload = payload, .size = size};
	if (jd_raw(dump, &rec) == 0) {
		count(&n_method_recs, 1);
		count(&n_named, (unsigned long)named);
		count(&method_bytes, JD_RECORD_HEADER + size);
	}
out:
	if (names)
		for (jint i = 0; i < n; i++)
			free(names[i]);
	free(names);
	free(payload);
	deallocate(jvmti, methods);
	deallocate(jvmti, csig);
	count(&methods_ns, now_ns() - begin);
}

/* Names the methods of every class loaded so far. ClassPrepare is enabled
 * first, so no class falls between; one prepared meanwhile is written
 * twice, under the same names. */
static void write_loaded_classes(jvmtiEnv *jvmti, JNIEnv *jni)
{
	jint n = 0;
	jclass *classes = NULL;
	if (!write_methods || (*jvmti)->GetLoadedClasses(jvmti, &n, &classes) != JVMTI_ERROR_NONE || !classes)
		return;
	for (jint i = 0; i < n; i++) {
		write_class_methods(jvmti, classes[i]);
		/* GetLoadedClasses hands out local references: thousands of
		 * them would otherwise outlive each class's use. */
		if (jni)
			(*jni)->DeleteLocalRef(jni, classes[i]);
	}
	deallocate(jvmti, classes);
}

static void JNICALL class_prepare(jvmtiEnv *jvmti, JNIEnv *jni, jthread thread, jclass klass)
{
	(void)jni;
	(void)thread;
	write_class_methods(jvmti, klass);
}

static void JNICALL vm_init(jvmtiEnv *jvmti, JNIEnv *jni, jthread thread)
{
	(void)thread;
	write_loaded_classes(jvmti, jni);
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
		method_lines ml;
		build_lines(jvmti, &cache, mi, fn.code_addr, fn.code_size, compile_info, &ml);
		fn.lines = ml.lines;
		fn.n_lines = ml.n_lines;
		jd_raw_record *extra = NULL;
		if (ml.n_inl > 0 && (fn.code_index = jd_reserve_index(dump)) != 0)
			extra = inline_records(&ml, fn.code_index, fn.code_size, &fn.n_extra);
		fn.extra = extra;
		if (jd_code_load(dump, &fn)) {
			count(&n_methods, 1);
			count(&n_lines, fn.n_lines);
			count(&n_inlines, fn.n_extra);
			for (size_t i = 0; i < fn.n_extra; i++)
				count(&inline_bytes, JD_RECORD_HEADER + extra[i].size);
		}
		if (extra)
			free((void *)extra[0].payload);
		free(extra);
		method_lines_free(&ml);
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
		fprintf(stderr, TAG ": %lu compiled methods (%lu line entries, %lu inline records of %lu bytes, %lu methods' inlining cut to the budget, %lu ns in the agent), %lu stubs, %lu unloads, %lu classes' method records (%lu methods, %lu bytes, %lu ns in the agent) written to %s\n",
			__atomic_load_n(&n_methods, __ATOMIC_RELAXED), __atomic_load_n(&n_lines, __ATOMIC_RELAXED),
			__atomic_load_n(&n_inlines, __ATOMIC_RELAXED), __atomic_load_n(&inline_bytes, __ATOMIC_RELAXED),
			__atomic_load_n(&n_cut, __ATOMIC_RELAXED), __atomic_load_n(&load_ns, __ATOMIC_RELAXED),
			__atomic_load_n(&n_stubs, __ATOMIC_RELAXED), __atomic_load_n(&n_unloads, __ATOMIC_RELAXED),
			__atomic_load_n(&n_method_recs, __ATOMIC_RELAXED), __atomic_load_n(&n_named, __ATOMIC_RELAXED),
			__atomic_load_n(&method_bytes, __ATOMIC_RELAXED), __atomic_load_n(&methods_ns, __ATOMIC_RELAXED),
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
 * $JITDUMPDIR, else a new directory under ~/.debug/jit), verbose (a
 * summary on stderr at exit) and nomethods (no JITPROF_METHODS records:
 * interpreted frames stay Interpreter). An absolute path alone is taken as the
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
		} else if (strcmp(opt, "nomethods") == 0) {
			write_methods = 0;
		} else if (*opt) {
			fprintf(stderr, TAG ": unknown option %s ignored (known: dir=PATH, /PATH, verbose, nomethods)\n", opt);
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
	jint got = (*vm)->GetEnv(vm, (void **)&jvmti, JVMTI_VERSION_1_2);
	if (got == JNI_EDETACHED && attaching) {
		/* HotSpot starts its attach listener before JVMTI's live phase,
		 * and GetEnv fails until then: the attacher (jitprof's hotspot
		 * package) takes this code for "too early" and tries again. */
		return JNI_EDETACHED;
	}
	if (got != JNI_OK || !jvmti) {
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
	cb.ClassPrepare = class_prepare;
	cb.VMInit = vm_init;
	static const jvmtiEvent events[] = {JVMTI_EVENT_COMPILED_METHOD_LOAD, JVMTI_EVENT_COMPILED_METHOD_UNLOAD,
					    JVMTI_EVENT_DYNAMIC_CODE_GENERATED, JVMTI_EVENT_VM_DEATH,
					    JVMTI_EVENT_CLASS_PREPARE, JVMTI_EVENT_VM_INIT};
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
		 * thread, through the callbacks above: first, as it names
		 * most of the samples. */
		if ((*jvmti)->GenerateEvents(jvmti, JVMTI_EVENT_DYNAMIC_CODE_GENERATED) != JVMTI_ERROR_NONE ||
		    (*jvmti)->GenerateEvents(jvmti, JVMTI_EVENT_COMPILED_METHOD_LOAD) != JVMTI_ERROR_NONE)
			fprintf(stderr, TAG ": the JVM did not replay its earlier code; only code compiled from now on is named\n");
		/* The VM is initialized already: its classes are named now,
		 * and no VMInit comes. */
		JNIEnv *jni = NULL;
		if ((*vm)->GetEnv(vm, (void **)&jni, JNI_VERSION_1_6) != JNI_OK)
			jni = NULL;
		write_loaded_classes(jvmti, jni);
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
