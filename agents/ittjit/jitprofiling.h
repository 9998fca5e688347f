/*
 * jitprofiling.h: the Intel JIT Profiling API as jitprof's collector
 * (libjitprof-ittjit.so) implements it. Written for jitprof from the API's
 * documented ABI (LP64, natural alignment); the numbers and layouts below are
 * what runtimes built against Intel's stub pass, so they must not change.
 *
 * A runtime reaches the collector in one of two ways:
 *  - through Intel's static stub linked into it (PHP's opcache, HHVM, V8,
 *    LLVM): the stub dlopens $INTEL_JIT_PROFILER64 and calls Initialize once,
 *    then NotifyEvent for each event;
 *  - by linking this library directly and calling iJIT_IsProfilingActive,
 *    iJIT_GetNewMethodID and iJIT_NotifyEvent.
 *
 * The collector writes a jitdump file (jit-<pid>.dump in $JITDUMPDIR, else a
 * new directory under ~/.debug/jit) that perf inject --jit and jitprof read.
 * Memory that events point to stays the caller's: everything needed is copied
 * before NotifyEvent returns.
 *
 * Inline trees (iJVM_EVENT_TYPE_METHOD_INLINE_LOAD_FINISHED) have no jitdump
 * record; the collector writes them as jitprof's extension record
 * JITPROF_INLINE (id ITTJIT_JITDUMP_INLINE_ID, ASCII "JP" in the high half so
 * that no future spec id meets it; perf skips it with a warning). Its layout
 * after the 16-byte record header (id, total_size, timestamp), in the dump's
 * byte order, offsets from the record's start:
 *
 *	@16 u64 code_index   the CODE_LOAD, earlier in the file, whose code holds
 *	                     this inlined code (the top-level method's region)
 *	@24 u64 code_addr    start of the inlined code
 *	@32 u64 code_size    its length in bytes
 *	@40 u32 method_id    the runtime's id of this inline instance
 *	@44 u32 parent_id    its parent: another inline instance's method_id, or
 *	                     root_id when it is inlined straight into the method
 *	@48 u32 root_id      method_id of the top-level method of code_index
 *	@52 u32 nr_entry     line entries that follow
 *	@56 nr_entry x { u64 addr; u32 line; u32 reserved (0) }
 *	                     absolute addresses, each entry covering the code up
 *	                     to the next one, as DEBUG_INFO entries do
 *	    char name[]      NUL-terminated
 *	    char file[]      source file, NUL-terminated ("" when unknown)
 *	    padding to 8 bytes
 */
#ifndef JITPROF_JITPROFILING_H
#define JITPROF_JITPROFILING_H

#ifdef __cplusplus
extern "C" {
#endif

/* The jitdump record id of the inline extension described above. */
#define ITTJIT_JITDUMP_INLINE_ID 0x4A500001u
#define ITTJIT_JITDUMP_INLINE_FIXED 56u

typedef enum iJIT_jvm_event {
	iJVM_EVENT_TYPE_SHUTDOWN = 2,
	iJVM_EVENT_TYPE_METHOD_LOAD_FINISHED = 13,       /* data: iJIT_Method_Load */
	iJVM_EVENT_TYPE_METHOD_UNLOAD_START = 14,        /* data: points to the method_id (u32) */
	iJVM_EVENT_TYPE_METHOD_UPDATE = 15,              /* data: iJIT_Method_Load (id, address, size) */
	iJVM_EVENT_TYPE_METHOD_INLINE_LOAD_FINISHED = 16, /* data: iJIT_Method_Inline_Load */
	iJVM_EVENT_TYPE_METHOD_UPDATE_V2 = 17,           /* data: iJIT_Method_Update */
	iJVM_EVENT_TYPE_ENTER_NIDS = 19,                 /* legacy call-graph events: ignored */
	iJVM_EVENT_TYPE_LEAVE_NIDS = 20,
	iJVM_EVENT_TYPE_METHOD_LOAD_FINISHED_V2 = 21,    /* data: iJIT_Method_Load_V2 */
	iJVM_EVENT_TYPE_METHOD_LOAD_FINISHED_V3 = 22     /* data: iJIT_Method_Load_V3 */
} iJIT_JVM_EVENT;

typedef enum _iJIT_IsProfilingActiveFlags {
	iJIT_NOTHING_RUNNING = 0,
	iJIT_SAMPLING_ON = 1,
	iJIT_CALLGRAPH_ON = 2 /* legacy */
} iJIT_IsProfilingActiveFlags;

/* One line of a code region's table. Offset is where the entry's code ENDS,
 * relative to the region's start; it starts where the previous entry ended
 * (0 for the first): {1,2},{12,4},{15,2} mean [0,1) line 2, [1,12) line 4,
 * [12,15) line 2. */
typedef struct _LineNumberInfo {
	unsigned int Offset;
	unsigned int LineNumber;
} *pLineNumberInfo, LineNumberInfo;

typedef enum _iJIT_CodeArchitecture {
	iJIT_CA_NATIVE = 0,
	iJIT_CA_32 = 1,
	iJIT_CA_64 = 2
} iJIT_CodeArchitecture;

/* METHOD_LOAD_FINISHED and METHOD_UPDATE. Older copies of the API append
 * fields after source_file_name; the collector reads only up to it. */
typedef struct _iJIT_Method_Load {
	unsigned int method_id;         /* nonzero; one id may name several regions */
	char *method_name;
	void *method_load_address;
	unsigned int method_size;
	unsigned int line_number_size;  /* entries in line_number_table */
	pLineNumberInfo line_number_table;
	unsigned int class_id;          /* unused */
	char *class_file_name;
	char *source_file_name;
} *piJIT_Method_Load, iJIT_Method_Load;

/* METHOD_LOAD_FINISHED_V2: as iJIT_Method_Load without class_id, plus the
 * module (the JIT engine or loaded module) the code belongs to. */
typedef struct _iJIT_Method_Load_V2 {
	unsigned int method_id;
	char *method_name;
	void *method_load_address;
	unsigned int method_size;
	unsigned int line_number_size;
	pLineNumberInfo line_number_table;
	char *class_file_name;
	char *source_file_name;
	char *module_name;
} *piJIT_Method_Load_V2, iJIT_Method_Load_V2;

/* METHOD_LOAD_FINISHED_V3: V2 plus the architecture of the code. */
typedef struct _iJIT_Method_Load_V3 {
	unsigned int method_id;
	char *method_name;
	void *method_load_address;
	unsigned int method_size;
	unsigned int line_number_size;
	pLineNumberInfo line_number_table;
	char *class_file_name;
	char *source_file_name;
	char *module_name;
	iJIT_CodeArchitecture module_arch;
} *piJIT_Method_Load_V3, iJIT_Method_Load_V3;

/* METHOD_INLINE_LOAD_FINISHED: code of method_id inlined into
 * parent_method_id (the top-level method or another inline instance), inside
 * the parent's range; siblings do not overlap. */
typedef struct _iJIT_Method_Inline_Load {
	unsigned int method_id;
	unsigned int parent_method_id;
	char *method_name;
	void *method_load_address;
	unsigned int method_size;
	unsigned int line_number_size;
	pLineNumberInfo line_number_table;
	char *class_file_name;
	char *source_file_name;
} *piJIT_Method_Inline_Load, iJIT_Method_Inline_Load;

typedef enum _iJIT_SegmentType {
	iJIT_CT_UNKNOWN = 0,
	iJIT_CT_CODE = 1, /* the range now holds new code */
	iJIT_CT_DATA = 2, /* the range holds data inside the code */
	iJIT_CT_KEEP = 3,
	iJIT_CT_EOF = 4
} iJIT_SegmentType;

/* METHOD_UPDATE_V2: a range inside an already reported method changed. */
typedef struct _iJIT_Method_Update {
	void *load_address;
	unsigned int size;
	iJIT_SegmentType type;
	const char *data_format;
} *piJIT_Method_Update, iJIT_Method_Update;

#define JITAPI_EXPORT __attribute__((visibility("default")))

/* The stub's entry points (looked up with dlsym). Initialize returns
 * iJIT_SAMPLING_ON when the dump is open, iJIT_NOTHING_RUNNING otherwise;
 * NotifyEvent returns 1 when the event was handled or deliberately dropped
 * (bad data, collector disabled), 0 for an event type it does not know. */
JITAPI_EXPORT unsigned int Initialize(void);
JITAPI_EXPORT unsigned int NotifyEvent(unsigned int event_type, void *event_data);

/* For runtimes that link the collector instead of the stub. */
JITAPI_EXPORT int iJIT_NotifyEvent(iJIT_JVM_EVENT event_type, void *event_data);
JITAPI_EXPORT iJIT_IsProfilingActiveFlags iJIT_IsProfilingActive(void);
/* A fresh method id (1, 2, ...), safe from any thread; 0 once all are used. */
JITAPI_EXPORT unsigned int iJIT_GetNewMethodID(void);

#ifdef __cplusplus
}
#endif

#endif
