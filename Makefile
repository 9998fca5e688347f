GO ?= go
CC ?= cc
# Where the agents are built: make agents BUILD=/some/dir.
BUILD ?= build

# The JDK's include directory (jvmti.h, jvmticmlr.h): $(JAVA_HOME), else the
# JDK of the javac on PATH, else any JDK under /usr/lib/jvm.
JAVAC_HOME := $(patsubst %/bin/javac,%,$(realpath $(shell command -v javac 2>/dev/null)))
JDK_INCLUDE ?= $(patsubst %/jvmti.h,%,$(firstword $(wildcard \
	$(addsuffix /include/jvmti.h,$(JAVA_HOME) $(JAVAC_HOME)) /usr/lib/jvm/*/include/jvmti.h)))

# The agents live inside foreign processes: position-independent, nothing
# exported but their entry points, nothing linked beyond libc.
AGENT_CFLAGS = -std=gnu11 -O2 -g -fPIC -fvisibility=hidden -Wall -Wextra -Iagents/jitdump $(CFLAGS)
AGENT_LDFLAGS = -shared -pthread -Wl,-z,defs -Wl,-z,now -Wl,-z,relro $(LDFLAGS)
WRITER = agents/jitdump/jitdump_writer.c agents/jitdump/jitdump_writer.h
ITTJIT_SRC = $(wildcard agents/ittjit/*.c)
AGENTS = $(BUILD)/libjitprof-jvmti.so $(BUILD)/libjitprof-ittjit.so

.PHONY: build install agents demo demo-data test bench

# Where make install puts jitprof: $(PREFIX)/bin.
PREFIX ?= /usr/local

# The jitprof command, built into ./jitprof with the agents embedded, so
# jitprof record can hand them out.
build: agents
	mkdir -p agents/lib
	cp $(AGENTS) agents/lib/
	$(GO) build -tags embedagents -o jitprof ./cmd/jitprof

# jitprof, agents built in, on the PATH, and a manual page per command
# where man looks (man jitprof-report), made from the commands' help;
# made anew, so that a command that is gone leaves no page.
install: build
	install -D -m 755 jitprof $(DESTDIR)$(PREFIX)/bin/jitprof
	rm -rf $(BUILD)/man1
	./jitprof man $(BUILD)/man1
	install -d $(DESTDIR)$(PREFIX)/share/man/man1
	install -m 644 $(BUILD)/man1/*.1 $(DESTDIR)$(PREFIX)/share/man/man1/

# The JVMTI agent for Java and the Intel JIT API collector.
agents: $(AGENTS)

$(BUILD)/libjitprof-jvmti.so: agents/jvmti/jvmti_agent.c $(WRITER)
	@test -n "$(JDK_INCLUDE)" || { echo "no JDK headers (jvmti.h) found: set JAVA_HOME or JDK_INCLUDE" >&2; exit 1; }
	@mkdir -p $(BUILD)
	$(CC) $(AGENT_CFLAGS) -I$(JDK_INCLUDE) -I$(JDK_INCLUDE)/linux -o $@ agents/jvmti/jvmti_agent.c agents/jitdump/jitdump_writer.c $(AGENT_LDFLAGS)

$(BUILD)/libjitprof-ittjit.so: $(ITTJIT_SRC) $(wildcard agents/ittjit/*.h) $(WRITER)
	@test -n "$(ITTJIT_SRC)" || { echo "no sources in agents/ittjit/" >&2; exit 1; }
	@mkdir -p $(BUILD)
	$(CC) $(AGENT_CFLAGS) -Iagents/ittjit -o $@ $(ITTJIT_SRC) agents/jitdump/jitdump_writer.c $(AGENT_LDFLAGS)

# jitprof's main job on a bundled recording: examples/minijit recorded with
# jitprof record -g and archived with jitprof archive (testdata/demo:
# minijit.tar.gz holds the recording, the jitdump minijit wrote, minijit
# itself, whose symbols name its Go frames, and the kernel's symbols; beside
# it, minijit's own measure of its CPU time and the recording and dump
# unpacked). No perf, JDK, root or runtime needed.
DEMO = testdata/demo
# jitprof for the demo, built once: go build redoes only what changed.
DEMO_JITPROF = $(BUILD)/demo/jitprof
DEMO_REPORT = $(DEMO_JITPROF) report -i $(DEMO)/minijit.tar.gz
demo:
	@echo "== building jitprof into $(DEMO_JITPROF): one to three minutes on a new machine, where the command and its libraries compile for the first time; seconds after"
	@$(GO) build -o $(DEMO_JITPROF) ./cmd/jitprof
	@echo
	@echo "== jitprof report: the top of the profile, jitted functions named from the dump"
	@$(DEMO_REPORT) --percent-limit 1
	@echo
	@echo "== jitprof report -g: jit:loop_b and jit:loop_c with their callers: the jitted jit:driver, called by minijit's Go code"
	@$(DEMO_REPORT) -q -g --sort symbol | awk '/^ +[0-9.]+%/ { show = /jit:loop_[bc]$$/ } show'
	@$(DEMO_REPORT) -q --format html -o flame.html
	@echo "== the flame graph: flame.html (one file; open it in a browser, click to zoom, type to search)"
	@echo
	@echo "== minijit's own measure, for comparison: each loop's share of its CPU time"
	@awk -F'"' '/"jit:loop_.": \{/ { name = $$2 } /"cpu_ns"/ && name { split($$3, v, /[: ,]+/); ns[name] = v[2]; total += v[2]; name = "" } \
		END { for (f in ns) printf "  %-11s %6.2f%%\n", f, 100 * ns[f] / total }' $(DEMO)/truth.json | sort -k2 -nr

# Records testdata/demo anew (root, or perf_event_paranoid 1 or less):
# minijit built without DWARF (its symbol table names its frames), run at
# high priority so that other work on the machine does not preempt it
# (preemption shows as kernel samples), in a directory of its own, its
# recording then archived with the files its samples hit.
demo-data:
	set -e; dir=$$(mktemp -d); \
	$(GO) build -o $$dir/jitprof ./cmd/jitprof; \
	$(GO) build -trimpath -ldflags=-w -o $$dir/minijit ./examples/minijit; \
	(cd $$dir && nice -n -10 ./jitprof record -g -F 999 -o perf.data -- ./minijit -duration 1.5s > truth.json); \
	(cd $$dir && ./jitprof archive -i perf.data -o minijit.tar.gz); \
	rm -f $(DEMO)/jit-*.dump; \
	cp $$dir/perf.data $$dir/jit-*.dump $$dir/truth.json $$dir/minijit.tar.gz $(DEMO)/; \
	rm -r $$dir

# Every test, after installing what the tests need (Debian 12).
test:
	scripts/test.sh

# The figures of docs/performance.md's tables (scripts/bench.sh says which).
bench:
	scripts/bench.sh
