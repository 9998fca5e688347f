/*
 * jitdump_writer: a small jitdump writer for agents that live inside foreign
 * processes (a JVM, a PHP interpreter, ...). It depends on libc and pthread
 * only and never aborts its host: the first failure (full disk, unwritable
 * directory, absurd input) is logged once to stderr, prefixed with the
 * writer's tag, and the writer disables itself; later calls do nothing.
 *
 * Format: the jitdump specification, revision 2 (header version 1, which is
 * what perf accepts and runtimes write; 40-byte header, host byte order and e_machine, CLOCK_MONOTONIC timestamps, so perf
 * must record with -k mono). The file is <dir>/jit-<pid>.dump and its first
 * page is mapped PROT_READ|PROT_EXEC, the marker perf record sees.
 *
 * Threads: every call may come from any thread. A function's DEBUG_INFO,
 * UNWINDING_INFO, CODE_LOAD and extension records go out as one write() under
 * the writer's mutex, so no other thread's record can come between a
 * DEBUG_INFO and the CODE_LOAD it belongs to (perf pairs them by position),
 * and a record is never torn by a concurrent one.
 *
 * Fork: a child process does not write to its parent's dump; calls in it do
 * nothing.
 *
 * All symbols are hidden: each agent links its own copy and exports none of
 * them.
 */
#ifndef JITPROF_JITDUMP_WRITER_H
#define JITPROF_JITDUMP_WRITER_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define JD_HIDDEN __attribute__((visibility("hidden")))

/* Record ids of the specification. Ids from JD_FIRST_EXTENSION_ID up are
 * free for extensions: perf inject skips records it does not know. */
enum {
	JD_CODE_LOAD = 0,
	JD_CODE_MOVE = 1,
	JD_CODE_DEBUG_INFO = 2,
	JD_CODE_CLOSE = 3,
	JD_CODE_UNWINDING_INFO = 4,
	JD_FIRST_EXTENSION_ID = 0x10000,
};

/* Inputs larger than these are refused as absurd (and disable the writer):
 * a record's total_size is 32 bits, and nothing real comes near. */
#define JD_MAX_NAME 65536u            /* bytes of a name or file name, NUL excluded; longer ones are cut */
#define JD_MAX_CODE (256u << 20)      /* bytes of code in one CODE_LOAD */
#define JD_MAX_DEBUG_ENTRIES 4000000u /* entries in one DEBUG_INFO */

typedef struct jd_writer jd_writer;

/* One address-to-line mapping of a DEBUG_INFO record. addr is an absolute
 * code address (inside the function, as perf expects); file may be NULL
 * (written as ""). */
typedef struct {
	uint64_t addr;
	uint32_t line;
	uint32_t discrim;
	const char *file;
} jd_debug_entry;

/* A record of the caller's choosing, written as it is after the record
 * header: for extensions (id >= JD_FIRST_EXTENSION_ID). */
typedef struct {
	uint32_t id;
	const void *payload;
	size_t size;
} jd_raw_record;

/* jitprof's extension record for inlined code, JITPROF_INLINE (layout in
 * jitdump/inline.go and agents/ittjit/jitprofiling.h): one method instance
 * inlined into the code of a CODE_LOAD. The instances of one function form a
 * tree by parent_id, siblings' code never overlapping. */
#define JD_INLINE_ID 0x4A500001u

typedef struct {
	uint64_t code_addr, code_size; /* the instance's code, inside the function's */
	uint32_t method_id;            /* this instance, unique within the function */
	uint32_t parent_id;            /* the instance it is inlined into, or root_id */
	uint32_t root_id;              /* the function itself */
	const jd_debug_entry *lines;   /* addr and line of each entry; file is ignored */
	size_t n_lines;
	const char *name, *file;       /* NULL is written as "" */
} jd_inline;

/* The payload size of in's record (after the record header), a multiple of 8. */
JD_HIDDEN size_t jd_inline_size(const jd_inline *in);

/* Encodes in for the CODE_LOAD code_index into dst, jd_inline_size(in) bytes. */
JD_HIDDEN void jd_inline_encode(void *dst, uint64_t code_index, const jd_inline *in);

/* One jitted function. Only name, code_addr and code_size are required. */
typedef struct {
	const char *name;      /* NUL-terminated; NULL is written as "" */
	uint64_t code_addr;    /* start of the code; also written as vma */
	uint64_t code_size;    /* bytes */
	const void *code;      /* code_size bytes copied into the record; NULL writes zeros */
	const jd_debug_entry *lines; /* DEBUG_INFO entries, written before the CODE_LOAD; may be NULL */
	size_t n_lines;
	/* UNWINDING_INFO, written before the CODE_LOAD when unwind_size > 0:
	 * unwind_size bytes laid out as perf and V8 do, .eh_frame followed by
	 * .eh_frame_hdr, the trailing eh_frame_hdr_size bytes being the header.
	 * mapped_size is what the process maps (0 or unwind_size). */
	const void *unwind;
	uint64_t unwind_size;
	uint64_t eh_frame_hdr_size;
	uint64_t mapped_size;
	/* Extension records written right after the CODE_LOAD, in the same
	 * write(); they can refer to it by its code index. Because indexes are
	 * allocated inside the call, use jd_reserve_index first when a payload
	 * must carry the index. */
	const jd_raw_record *extra;
	size_t n_extra;
	uint64_t code_index; /* 0: allocate one; else an index from jd_reserve_index */
} jd_function;

/*
 * jd_open creates the dump and writes its header.
 * dir: the directory for jit-<pid>.dump; NULL or "" means $JITDUMPDIR, else a
 *      new directory ~/.debug/jit/<tag>-jit-<yyyymmdd>.XXXXXX (mkdtemp).
 * tag: a short name for log lines ("jitprof-jvmti") and the directory name;
 *      it is copied.
 * Returns NULL when the dump cannot be made (the reason is logged once);
 * every other function accepts NULL and does nothing.
 */
JD_HIDDEN jd_writer *jd_open(const char *dir, const char *tag);

/* The dump's path, or "" when there is none. Valid until the process ends. */
JD_HIDDEN const char *jd_path(const jd_writer *w);

/* Whether records are still being written (not closed, not disabled). */
JD_HIDDEN int jd_active(const jd_writer *w);

/* A fresh code index (1, 2, ...), unique within the dump. */
JD_HIDDEN uint64_t jd_reserve_index(jd_writer *w);

/* Writes fn's DEBUG_INFO and UNWINDING_INFO when present, its CODE_LOAD and
 * its extension records, in one write(). Returns the code index it was given
 * (for jd_code_move), or 0 when nothing was written. */
JD_HIDDEN uint64_t jd_code_load(jd_writer *w, const jd_function *fn);

/* Writes CODE_MOVE: code_index, code_size bytes long, moved from old_addr to
 * new_addr. Returns 0 on success, -1 if nothing was written. */
JD_HIDDEN int jd_code_move(jd_writer *w, uint64_t code_index, uint64_t old_addr, uint64_t new_addr, uint64_t code_size);

/* Writes one record with the given id and payload (for extensions that do
 * not belong to a CODE_LOAD). Returns 0 on success, -1 if nothing was written. */
JD_HIDDEN int jd_raw(jd_writer *w, const jd_raw_record *rec);

/* Writes CODE_CLOSE, unmaps the marker and closes the file. The handle stays
 * valid (callbacks racing with shutdown may still hold it); later calls do
 * nothing. */
JD_HIDDEN void jd_close(jd_writer *w);

/* Turns the writer off after a failure the caller found (say, absurd data
 * from the host): logs "<tag>: <reason>; jitdump disabled" once. */
JD_HIDDEN void jd_disable(jd_writer *w, const char *reason);

#ifdef __cplusplus
}
#endif

#endif
