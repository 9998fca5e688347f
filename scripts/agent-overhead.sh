#!/usr/bin/env bash
# Measures what `jitprof agent` costs at its defaults (49 Hz, 10 s windows,
# --pprof-dir) on this machine: busy node, Java and Erlang programs run
# beside it, their JIT dumps read every window, and everything else the
# machine runs is sampled too. The agent's user and system time over the
# second half of the run (the first half holds its start: the machine's
# binaries read for the first time) is printed as a share of one core,
# with its resident memory at the end and the samples it took.
#
#   scripts/agent-overhead.sh [SECONDS]   (default 180; needs root for perf)
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-180}
repo=$(pwd)
work=$(mktemp -d)
pids=()
cleanup() {
	kill "${pids[@]}" 2>/dev/null || true
	wait 2>/dev/null || true
	# Erlang writes its dump and perf map in /tmp wherever it runs.
	for pid in "${pids[@]}"; do rm -f "/tmp/jit-$pid.dump" "/tmp/perf-$pid.map"; done
	rm -rf "$work"
}
trap cleanup EXIT

go build -o "$work/jitprof" ./cmd/jitprof
make -s --no-print-directory agents BUILD="$work"
javac -d "$work" testdata/workloads/Work.java
erlc -o "$work" internal/agent/testdata/busy.erl

ms=$(((seconds + 20) * 1000))
cd "$work"
node --perf-prof "$repo/internal/agent/testdata/busy.js" "$ms" >/dev/null &
pids+=($!)
java -agentpath:"$work/libjitprof-jvmti.so=dir=$work" -cp "$work" Work "$ms" >/dev/null &
pids+=($!)
erl -noshell -boot no_dot_erlang +JPperf true -pa "$work" -s busy main "$ms" >/dev/null &
pids+=($!)
sleep 5 # the runtimes started, their code compiled

# shellcheck disable=SC2086 # AGENT_FLAGS: more flags, --cpuprofile FILE say
"$work/jitprof" agent -q --pprof-dir "$work/pprof" --status "$work/status.json" ${AGENT_FLAGS:-} &
agent=$!
pids+=("$agent")

# cpu_ticks PID: the process's user + system time, in clock ticks.
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
sleep $((seconds / 2))
t0=$(cpu_ticks "$agent")
s0=$(date +%s%N)
sleep $((seconds - seconds / 2))
t1=$(cpu_ticks "$agent")
s1=$(date +%s%N)
rss=$(awk '/^VmRSS/ {print $2}' "/proc/$agent/status")
hz=$(getconf CLK_TCK)
awk -v dt=$((t1 - t0)) -v hz="$hz" -v ns=$((s1 - s0)) -v rss="$rss" -v procs="$(ls /proc | grep -c '^[0-9]')" 'BEGIN {
	printf "agent: %.2f%% of one core over the last %.0f s; %.1f MB resident; %d processes on the machine\n",
		100 * dt / hz / (ns / 1e9), ns / 1e9, rss / 1024, procs
}'
grep -o '"\(windows\|samples\|lost\|profiled\)": *[0-9]*' "$work/status.json" | tr '\n' ' '
echo
kill -INT "$agent" # a clean stop: the agent's own --cpuprofile is written then
wait "$agent" || true
