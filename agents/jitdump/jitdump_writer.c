/* The jitdump writer shared by jitprof's agents; see jitdump_writer.h. */
#define _GNU_SOURCE
#include "jitdump_writer.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#if defined(__x86_64__)
#define JD_HOST_MACH EM_X86_64
#elif defined(__aarch64__)
#define JD_HOST_MACH EM_AARCH64
#elif defined(__i386__)
#define JD_HOST_MACH EM_386
#elif defined(__arm__)
#define JD_HOST_MACH EM_ARM
#elif defined(__riscv)
#define JD_HOST_MACH EM_RISCV
#elif defined(__powerpc64__)
#define JD_HOST_MACH EM_PPC64
#elif defined(__s390x__)
#define JD_HOST_MACH EM_S390
#elif defined(__loongarch__)
#define JD_HOST_MACH 258 /* EM_LOONGARCH, missing from older elf.h */
#else
#define JD_HOST_MACH EM_NONE
#endif

#define JD_MAGIC 0x4A695444u
/* The spec says 2, but perf 6.1's inject refuses anything but 1 ("wrong
 * jitdump version 2, expected 1"), and every runtime writes 1 with
 * revision-2 records. */
#define JD_VERSION 1u
#define JD_HEADER_SIZE 40u
#define JD_RECORD_HEADER 16u
/* A write group (DEBUG_INFO + UNWINDING_INFO + CODE_LOAD + extensions) may not
 * exceed this: each record's total_size is 32 bits. */
#define JD_MAX_GROUP (UINT32_MAX - 64u)

struct jd_writer {
	pthread_mutex_t mu;
	int fd;
	int disabled; /* set once, never cleared */
	pid_t pid;
	void *marker;
	size_t marker_len;
	uint64_t next_index;
	unsigned char *buf; /* the group being assembled, reused under mu */
	size_t len, cap;
	int overflow; /* the group outgrew JD_MAX_GROUP or memory */
	char tag[64];
	char path[PATH_MAX];
};

static uint64_t jd_now(void)
{
	struct timespec ts;
	if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0)
		return 0;
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void jd_log(const char *tag, const char *fmt, ...)
{
	char msg[PATH_MAX + 256];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	fprintf(stderr, "%s: %s\n", tag, msg);
}

/* Called with mu held (or before w is shared). */
static void jd_fail_locked(jd_writer *w, const char *what, int err)
{
	if (w->disabled)
		return;
	w->disabled = 1;
	if (err)
		jd_log(w->tag, "%s %s: %s; jitdump disabled, the program goes on", what, w->path, strerror(err));
	else
		jd_log(w->tag, "%s (dump %s); jitdump disabled, the program goes on", what, w->path);
}

/* Whether w may write now; a forked child never writes to its parent's dump. */
static int jd_usable_locked(const jd_writer *w)
{
	return !w->disabled && w->fd >= 0 && getpid() == w->pid;
}

static void jd_reserve(jd_writer *w, size_t n)
{
	if (w->overflow)
		return;
	if (n > JD_MAX_GROUP - w->len) {
		w->overflow = 1;
		return;
	}
	size_t need = w->len + n;
	if (need <= w->cap)
		return;
	size_t cap = w->cap ? w->cap : 4096;
	while (cap < need)
		cap = cap > JD_MAX_GROUP / 2 ? need : cap * 2;
	unsigned char *b = realloc(w->buf, cap);
	if (!b) {
		w->overflow = 1;
		return;
	}
	w->buf = b;
	w->cap = cap;
}

static void jd_put(jd_writer *w, const void *p, size_t n)
{
	jd_reserve(w, n);
	if (w->overflow || n == 0)
		return;
	if (p)
		memcpy(w->buf + w->len, p, n);
	else
		memset(w->buf + w->len, 0, n);
	w->len += n;
}

static void jd_put32(jd_writer *w, uint32_t v) { jd_put(w, &v, sizeof v); }
static void jd_put64(jd_writer *w, uint64_t v) { jd_put(w, &v, sizeof v); }

static size_t jd_name_len(const char *s)
{
	return s ? strnlen(s, JD_MAX_NAME) : 0;
}

/* Appends s cut to JD_MAX_NAME bytes, then a NUL. */
static void jd_put_str(jd_writer *w, const char *s)
{
	jd_put(w, s, jd_name_len(s));
	jd_put(w, "", 1);
}

/* Starts a record; jd_end_record fills in its size. Returns its offset. */
static size_t jd_begin_record(jd_writer *w, uint32_t id, uint64_t ts)
{
	size_t at = w->len;
	jd_put32(w, id);
	jd_put32(w, 0);
	jd_put64(w, ts);
	return at;
}

static void jd_end_record(jd_writer *w, size_t at)
{
	if (w->overflow)
		return;
	uint32_t size = (uint32_t)(w->len - at);
	memcpy(w->buf + at + 4, &size, sizeof size);
}

/* Writes the assembled group with one write(), finishing short writes, and
 * empties the buffer. Returns 0 or -1 (the writer is then disabled). */
static int jd_flush_locked(jd_writer *w)
{
	if (w->overflow) {
		w->overflow = 0;
		w->len = 0;
		jd_fail_locked(w, "a record too large for jitdump or for memory", 0);
		return -1;
	}
	size_t done = 0;
	while (done < w->len) {
		ssize_t n = write(w->fd, w->buf + done, w->len - done);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			w->len = 0;
			jd_fail_locked(w, "writing", n < 0 ? errno : EIO);
			return -1;
		}
		done += (size_t)n;
	}
	w->len = 0;
	return 0;
}

static pid_t jd_tid(void)
{
	return (pid_t)syscall(SYS_gettid);
}

/* Makes ~/.debug/jit/<tag>-jit-<date>.XXXXXX into dir (PATH_MAX bytes). */
static int jd_make_dir(char *dir, const char *tag)
{
	const char *home = getenv("HOME");
	if (!home || !*home) {
		errno = ENOENT;
		return -1;
	}
	char base[PATH_MAX];
	if (snprintf(base, sizeof base, "%s/.debug", home) >= (int)sizeof base) {
		errno = ENAMETOOLONG;
		return -1;
	}
	if (mkdir(base, 0755) != 0 && errno != EEXIST)
		return -1;
	strcat(base, "/jit");
	if (mkdir(base, 0755) != 0 && errno != EEXIST)
		return -1;
	char date[16] = "00000000";
	time_t now = time(NULL);
	struct tm tm;
	if (localtime_r(&now, &tm))
		strftime(date, sizeof date, "%Y%m%d", &tm);
	if (snprintf(dir, PATH_MAX, "%s/%s-jit-%s.XXXXXX", base, tag, date) >= PATH_MAX) {
		errno = ENAMETOOLONG;
		return -1;
	}
	return mkdtemp(dir) ? 0 : -1;
}

jd_writer *jd_open(const char *dir, const char *tag)
{
	jd_writer *w = calloc(1, sizeof *w);
	if (!w) {
		jd_log(tag ? tag : "jitdump", "out of memory; jitdump disabled, the program goes on");
		return NULL;
	}
	snprintf(w->tag, sizeof w->tag, "%s", tag && *tag ? tag : "jitdump");
	w->fd = -1;
	w->pid = getpid();
	w->next_index = 1;
	pthread_mutex_init(&w->mu, NULL);

	char made[PATH_MAX];
	if (!dir || !*dir)
		dir = getenv("JITDUMPDIR");
	if (!dir || !*dir) {
		if (jd_make_dir(made, w->tag) != 0) {
			snprintf(w->path, sizeof w->path, "~/.debug/jit");
			goto fail;
		}
		dir = made;
	}
	if (snprintf(w->path, sizeof w->path, "%s/jit-%d.dump", dir, (int)w->pid) >= (int)sizeof w->path) {
		errno = ENAMETOOLONG;
		goto fail;
	}
	/* O_EXCL|O_NOFOLLOW: nobody can make the host write through a planted
	 * link; O_RDWR because the marker mapping needs read access. 0600: the
	 * dump names the host's functions and holds its code, and $JITDUMPDIR
	 * can be a shared directory (jitprof record's -o /tmp/x.data); its
	 * readers, perf inject and jitprof, run as its user or root. */
	w->fd = open(w->path, O_CREAT | O_EXCL | O_RDWR | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (w->fd < 0)
		goto fail;

	jd_put32(w, JD_MAGIC);
	jd_put32(w, JD_VERSION);
	jd_put32(w, JD_HEADER_SIZE);
	jd_put32(w, JD_HOST_MACH);
	jd_put32(w, 0);
	jd_put32(w, (uint32_t)w->pid);
	jd_put64(w, jd_now());
	jd_put64(w, 0);
	if (jd_flush_locked(w) != 0)
		goto cleanup;

	/* The marker perf record sees as an executable mapping of the file; the
	 * page is never touched. */
	long page = sysconf(_SC_PAGESIZE);
	w->marker_len = page > 0 ? (size_t)page : 4096;
	w->marker = mmap(NULL, w->marker_len, PROT_READ | PROT_EXEC, MAP_PRIVATE, w->fd, 0);
	if (w->marker == MAP_FAILED) {
		w->marker = NULL;
		goto fail;
	}
	return w;

fail:
	jd_fail_locked(w, "cannot create the dump", errno);
cleanup:
	if (w->fd >= 0) {
		close(w->fd);
		unlink(w->path);
	}
	free(w->buf);
	pthread_mutex_destroy(&w->mu);
	free(w);
	return NULL;
}

const char *jd_path(const jd_writer *w)
{
	return w ? w->path : "";
}

int jd_active(const jd_writer *w)
{
	if (!w)
		return 0;
	pthread_mutex_lock((pthread_mutex_t *)&w->mu);
	int ok = jd_usable_locked(w);
	pthread_mutex_unlock((pthread_mutex_t *)&w->mu);
	return ok;
}

uint64_t jd_reserve_index(jd_writer *w)
{
	if (!w)
		return 0;
	pthread_mutex_lock(&w->mu);
	uint64_t i = w->next_index++;
	pthread_mutex_unlock(&w->mu);
	return i;
}

static void jd_put_debug_info(jd_writer *w, const jd_function *fn, uint64_t ts)
{
	size_t at = jd_begin_record(w, JD_CODE_DEBUG_INFO, ts);
	jd_put64(w, fn->code_addr);
	jd_put64(w, fn->n_lines);
	for (size_t i = 0; i < fn->n_lines && !w->overflow; i++) {
		const jd_debug_entry *e = &fn->lines[i];
		jd_put64(w, e->addr);
		jd_put32(w, e->line);
		jd_put32(w, e->discrim);
		jd_put_str(w, e->file);
	}
	jd_end_record(w, at);
}

static void jd_put_unwinding(jd_writer *w, const jd_function *fn, uint64_t ts)
{
	size_t at = jd_begin_record(w, JD_CODE_UNWINDING_INFO, ts);
	jd_put64(w, fn->unwind_size);
	jd_put64(w, fn->eh_frame_hdr_size);
	jd_put64(w, fn->mapped_size);
	jd_put(w, fn->unwind, fn->unwind_size);
	/* perf reads unwinding data in 8-byte units; pad as V8 does. */
	jd_put(w, NULL, (8 - (w->len - at) % 8) % 8);
	jd_end_record(w, at);
}

static void jd_put_raw(jd_writer *w, const jd_raw_record *r, uint64_t ts)
{
	size_t at = jd_begin_record(w, r->id, ts);
	jd_put(w, r->payload, r->size);
	jd_end_record(w, at);
}

#define JD_INLINE_FIXED 40u /* after the record header: code_index .. nr_entry */
#define JD_INLINE_ENTRY 16u

size_t jd_inline_size(const jd_inline *in)
{
	size_t size = JD_INLINE_FIXED + JD_INLINE_ENTRY * in->n_lines + jd_name_len(in->name) + 1 + jd_name_len(in->file) + 1;
	return (size + 7) & ~(size_t)7;
}

void jd_inline_encode(void *dst, uint64_t code_index, const jd_inline *in)
{
	unsigned char *p = dst;
	size_t size = jd_inline_size(in);
	memset(p, 0, size);
	uint64_t head[3] = {code_index, in->code_addr, in->code_size};
	uint32_t ids[4] = {in->method_id, in->parent_id, in->root_id, (uint32_t)in->n_lines};
	memcpy(p, head, sizeof head);
	memcpy(p + sizeof head, ids, sizeof ids);
	p += JD_INLINE_FIXED;
	for (size_t i = 0; i < in->n_lines; i++, p += JD_INLINE_ENTRY) {
		memcpy(p, &in->lines[i].addr, 8);
		memcpy(p + 8, &in->lines[i].line, 4);
	}
	size_t name_len = jd_name_len(in->name);
	if (name_len)
		memcpy(p, in->name, name_len);
	p += name_len + 1;
	if (jd_name_len(in->file))
		memcpy(p, in->file, jd_name_len(in->file));
}

/* Why fn cannot be written, or NULL. */
static const char *jd_absurd(const jd_function *fn)
{
	if (fn->code_size > JD_MAX_CODE)
		return "a function's code_size is absurd";
	if (fn->n_lines > JD_MAX_DEBUG_ENTRIES)
		return "a function's line table is absurdly long";
	if (fn->n_lines && !fn->lines)
		return "a function has line entries but no table";
	if (fn->unwind_size > JD_MAX_CODE || fn->eh_frame_hdr_size > fn->unwind_size)
		return "a function's unwinding data sizes are absurd";
	if (fn->unwind_size && !fn->unwind)
		return "a function has unwinding data size but no data";
	if (fn->n_extra && !fn->extra)
		return "a function has extension records but no array";
	for (size_t i = 0; i < fn->n_extra; i++)
		if (fn->extra[i].size > JD_MAX_CODE || (fn->extra[i].size && !fn->extra[i].payload))
			return "an extension record's size is absurd";
	return NULL;
}

uint64_t jd_code_load(jd_writer *w, const jd_function *fn)
{
	if (!w)
		return 0;
	pid_t tid = jd_tid();
	pthread_mutex_lock(&w->mu);
	uint64_t index = 0;
	if (!jd_usable_locked(w))
		goto out;
	const char *why = fn ? jd_absurd(fn) : "a NULL function";
	if (why) {
		jd_fail_locked(w, why, 0);
		goto out;
	}
	index = fn->code_index ? fn->code_index : w->next_index++;
	/* Taken under the lock, so timestamps never go backwards in the file. */
	uint64_t ts = jd_now();
	if (fn->n_lines)
		jd_put_debug_info(w, fn, ts);
	if (fn->unwind_size)
		jd_put_unwinding(w, fn, ts);
	size_t at = jd_begin_record(w, JD_CODE_LOAD, ts);
	jd_put32(w, (uint32_t)w->pid);
	jd_put32(w, (uint32_t)tid);
	jd_put64(w, fn->code_addr);
	jd_put64(w, fn->code_addr);
	jd_put64(w, fn->code_size);
	jd_put64(w, index);
	jd_put_str(w, fn->name);
	jd_put(w, fn->code, fn->code_size);
	jd_end_record(w, at);
	for (size_t i = 0; i < fn->n_extra; i++)
		jd_put_raw(w, &fn->extra[i], ts);
	if (jd_flush_locked(w) != 0)
		index = 0;
out:
	pthread_mutex_unlock(&w->mu);
	return index;
}

int jd_code_move(jd_writer *w, uint64_t code_index, uint64_t old_addr, uint64_t new_addr, uint64_t code_size)
{
	if (!w)
		return -1;
	pid_t tid = jd_tid();
	pthread_mutex_lock(&w->mu);
	int rc = -1;
	if (jd_usable_locked(w)) {
		size_t at = jd_begin_record(w, JD_CODE_MOVE, jd_now());
		jd_put32(w, (uint32_t)w->pid);
		jd_put32(w, (uint32_t)tid);
		jd_put64(w, new_addr);
		jd_put64(w, old_addr);
		jd_put64(w, new_addr);
		jd_put64(w, code_size);
		jd_put64(w, code_index);
		jd_end_record(w, at);
		rc = jd_flush_locked(w);
	}
	pthread_mutex_unlock(&w->mu);
	return rc;
}

int jd_raw(jd_writer *w, const jd_raw_record *rec)
{
	if (!w)
		return -1;
	pthread_mutex_lock(&w->mu);
	int rc = -1;
	if (jd_usable_locked(w)) {
		if (!rec || rec->size > JD_MAX_CODE || (rec->size && !rec->payload)) {
			jd_fail_locked(w, "an absurd extension record", 0);
		} else {
			jd_put_raw(w, rec, jd_now());
			rc = jd_flush_locked(w);
		}
	}
	pthread_mutex_unlock(&w->mu);
	return rc;
}

void jd_close(jd_writer *w)
{
	if (!w)
		return;
	pthread_mutex_lock(&w->mu);
	if (w->fd >= 0 && getpid() == w->pid) {
		if (!w->disabled) {
			size_t at = jd_begin_record(w, JD_CODE_CLOSE, jd_now());
			jd_end_record(w, at);
			jd_flush_locked(w);
		}
		if (w->marker)
			munmap(w->marker, w->marker_len);
		close(w->fd);
	}
	w->marker = NULL;
	w->fd = -1;
	free(w->buf);
	w->buf = NULL;
	w->len = w->cap = 0;
	pthread_mutex_unlock(&w->mu);
}

void jd_disable(jd_writer *w, const char *reason)
{
	if (!w)
		return;
	pthread_mutex_lock(&w->mu);
	jd_fail_locked(w, reason ? reason : "disabled by the agent", 0);
	pthread_mutex_unlock(&w->mu);
}
