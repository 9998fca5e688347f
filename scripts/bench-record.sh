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
workloads=${JITPROF_WORKLOADS:-$repo/testdata/workloads}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

go build -o "$work/jitprof" ./cmd/jitprof
gcc -O2 -fno-omit-frame-pointer -o "$work/fib_sq" "$workloads/fib_sq.c"

# timed CMD... runs CMD (which may be a recorder running the workload) and
# prints three times in milliseconds: the workload's own wall time, measured
# by a shell around it inside the recorder (its slowdown is the target), the
# whole command's (with the recorder's start and finish), and the CPU time
# (user and system) of the recorder and the workload together, which shows
# what the recorder costs on a machine with cores to spare.
timed() {
	local s e
	s=$(date +%s%N)
	/usr/bin/time -o "$work/cpu" -f '%U %S' "$@" >/dev/null 2>&1
	e=$(date +%s%N)
	echo "$(cat "$work/inner") $(((e - s) / 1000000)) $(awk '{printf "%d", 1000 * ($1 + $2)}' "$work/cpu")"
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
	local b p j pw jw bc pc jc
	col() { cut -d' ' -f"$1" <<<"${2%$'\n'}" | median; }
	b=$(col 1 "$base") p=$(col 1 "$perf") j=$(col 1 "$jit")
	pw=$(col 2 "$perf") jw=$(col 2 "$jit")
	bc=$(col 3 "$base") pc=$(col 3 "$perf") jc=$(col 3 "$jit")
	awk -v n="$name" -v b="$b" -v p="$p" -v j="$j" -v pw="$pw" -v jw="$jw" -v bc="$bc" -v pc="$pc" -v jc="$jc" 'BEGIN {
		printf "%s\n  workload wall time: alone %d ms, under perf record %d ms (%+.1f%%), under jitprof record %d ms (%+.1f%%); slowdown jitprof/perf: %s\n",
			n, b, p, 100 * (p - b) / b, j, 100 * (j - b) / b,
			(p - b <= 0 ? "n/a (perf adds nothing measurable)" : sprintf("%.2f", (j > b ? j - b : 0) / (p - b)))
		printf "  whole command: perf record %d ms, jitprof record %d ms\n", pw, jw
		printf "  CPU time added to the workload'"'"'s %d ms: perf record %+d ms, jitprof record %+d ms\n", bc, pc - bc, jc - bc
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
