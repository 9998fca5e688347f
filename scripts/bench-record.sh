#!/usr/bin/env bash
# Measures the overhead of `jitprof record -F 999 -g` against that of
# `perf record -F 999 -g` on the same workloads, side by side in one run
# (the machines are noisy): each workload runs alone, under perf and under
# jitprof, in turns, ROUNDS times; the median wall time of each gives the
# slowdowns, and their ratio is printed (below 1: jitprof costs less).
#
# Both record with the same event, frequency and frame-pointer call chains;
# jitprof with --no-runtime-env, so that both sample the same program (the
# runtime environment makes node also write a jitdump, measured apart).
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${ROUNDS:-7}
repo=$(pwd)
workloads=${JITPROF_WORKLOADS:-$repo/../shared/workloads}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

go build -o "$work/jitprof" ./cmd/jitprof
gcc -O2 -fno-omit-frame-pointer -o "$work/fib_sq" "$workloads/fib_sq.c"

# ms prints the wall time of a command in milliseconds.
ms() {
	local s e
	s=$(date +%s%N)
	"$@" >/dev/null 2>&1
	e=$(date +%s%N)
	echo $(((e - s) / 1000000))
}

median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

# compare NAME CMD...: the median of each way of running CMD, and the ratio.
compare() {
	local name=$1
	shift
	local -a base perf jit
	cd "$work"
	for _ in $(seq "$rounds"); do
		base+=("$(ms "$@")")
		perf+=("$(ms perf record -q -k mono --no-bpf-event -e cpu-clock -F 999 -g -o "$work/perf.data" -- "$@")")
		jit+=("$(ms "$work/jitprof" record -q --no-runtime-env -e cpu-clock -F 999 -g -o "$work/jit.data" -- "$@")")
	done
	cd "$repo"
	local b p j
	b=$(printf '%s\n' "${base[@]}" | median)
	p=$(printf '%s\n' "${perf[@]}" | median)
	j=$(printf '%s\n' "${jit[@]}" | median)
	awk -v n="$name" -v b="$b" -v p="$p" -v j="$j" 'BEGIN {
		printf "%-28s alone %5d ms   perf record %5d ms (+%5.1f%%)   jitprof record %5d ms (+%5.1f%%)   slowdown ratio jitprof/perf %.2f\n",
			n, b, p, 100 * (p - b) / b, j, 100 * (j - b) / b, (j - b <= 0 ? 0 : (p - b <= 0 ? "inf" : (j - b) / (p - b)))
	}'
}

compare "C fib_sq (1 thread)" "$work/fib_sq"
compare "node manyfunctions.js 2500" node "$workloads/manyfunctions.js" 2500

# What the runtime environment costs node on top: its jitdump.
cd "$work"
with=$(for _ in $(seq "$rounds"); do ms "$work/jitprof" record -q -e cpu-clock -F 999 -g -o "$work/jit.data" -- node "$workloads/manyfunctions.js" 2500; done | median)
without=$(for _ in $(seq "$rounds"); do ms "$work/jitprof" record -q --no-runtime-env -e cpu-clock -F 999 -g -o "$work/jit.data" -- node "$workloads/manyfunctions.js" 2500; done | median)
echo "node manyfunctions.js 2500 under jitprof record: $without ms, $with ms with the runtime environment (--perf-prof, --interpreted-frames-native-stack)"
