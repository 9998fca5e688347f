GO ?= go

.PHONY: build demo test bench

# The jitprof command, built into ./jitprof.
build:
	$(GO) build -o jitprof ./cmd/jitprof

# jitprof's main job on the bundled input, a dump PHP's JIT wrote.
demo: build
	./jitprof check testdata/php-fib_mandel.dump
	./jitprof dump --stats testdata/php-fib_mandel.dump
	./jitprof dump testdata/php-fib_mandel.dump | head -12

# Every test, after installing what the tests need (Debian 12).
test:
	scripts/test.sh

# The figures of the README's performance table.
bench:
	scripts/bench.sh
