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

# timed CMD... runs CMD (which may be a recorder running the workload) and
# prints two times in milliseconds: the workload's own wall time, measured
# by a shell around it inside the recorder (its slowdown is the target), and
# the whole command's (with the recorder's start and finish).
timed() {
	local s e
	s=$(date +%s%N)
	"$@" >/dev/null 2>&1
	e=$(date +%s%N)
	echo "$(cat "$work/inner") $(((e - s) / 1000000))"
}
inner=(sh -c 's=$(date +%s%N); "$@" >/dev/null 2>&1; e=$(date +%s%N); echo $(((e - s) / 1000000)) >"$0"' "$work/inner")

median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

# compare NAME CMD...: the medians of each way of running CMD, and the ratio
# of the workload's slowdowns.
compare() {
	local name=$1
	shift
	local base="" perf="" jit=""
	cd "$work"
	for _ in $(seq "$rounds"); do
		base+="$(timed "${inner[@]}" "$@")"$'\n'
		perf+="$(timed perf record -q -k mono --no-bpf-event -e cpu-clock -F 999 -g -o "$work/perf.data" -- "${inner[@]}" "$@")"$'\n'
		jit+="$(timed "$work/jitprof" record -q --no-runtime-env -e cpu-clock -F 999 -g -o "$work/jit.data" -- "${inner[@]}" "$@")"$'\n'
	done
	cd "$repo"
	local b p j bw pw jw
	b=$(cut -d' ' -f1 <<<"${base%$'\n'}" | median)
	p=$(cut -d' ' -f1 <<<"${perf%$'\n'}" | median)
	j=$(cut -d' ' -f1 <<<"${jit%$'\n'}" | median)
	pw=$(cut -d' ' -f2 <<<"${perf%$'\n'}" | median)
	jw=$(cut -d' ' -f2 <<<"${jit%$'\n'}" | median)
	awk -v n="$name" -v b="$b" -v p="$p" -v j="$j" -v pw="$pw" -v jw="$jw" 'BEGIN {
		printf "%-30s alone %5d ms | perf record %5d ms (%+5.1f%%), %5d ms in all | jitprof record %5d ms (%+5.1f%%), %5d ms in all | slowdown jitprof/perf: %s\n",
			n, b, p, 100 * (p - b) / b, pw, j, 100 * (j - b) / b, jw,
			(p - b <= 0 ? "n/a (perf adds nothing measurable)" : sprintf("%.2f", (j > b ? j - b : 0) / (p - b)))
	}'
}

compare "C fib_sq x200 (processes)" sh -c 'for i in $(seq 200); do "$0"; done' "$work/fib_sq"
compare "node manyfunctions.js 2500" node "$workloads/manyfunctions.js" 2500

# What the runtime environment costs node on top: writing its jitdump.
cd "$work"
node=(node "$workloads/manyfunctions.js" 2500)
with=$(for _ in $(seq "$rounds"); do timed "$work/jitprof" record -q -e cpu-clock -F 999 -g -o "$work/jit.data" -- "${inner[@]}" "${node[@]}"; done | cut -d' ' -f1 | median)
without=$(for _ in $(seq "$rounds"); do timed "$work/jitprof" record -q --no-runtime-env -e cpu-clock -F 999 -g -o "$work/jit.data" -- "${inner[@]}" "${node[@]}"; done | cut -d' ' -f1 | median)
echo "node manyfunctions.js 2500 under jitprof record: $without ms; $with ms with the runtime environment (--perf-prof, --interpreted-frames-native-stack)"
