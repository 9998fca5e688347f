#!/usr/bin/env bash
# Measures the figures of docs/performance.md's tables (the README quotes a
# few): reading and writing dumps and perf maps, dump --stats against cat,
# jitprof inject against perf inject --jit, and jitprof report against perf
# inject + perf report. Each comparison is made in one run, side by side,
# since the machines are noisy.
set -euo pipefail
cd "$(dirname "$0")/.."

go test -run '^$' -bench 'BenchmarkRead|BenchmarkWriterLoad' -benchmem -benchtime 2s ./jitdump
go test -run '^$' -bench . -benchmem ./perfmap

# dump --stats on a 400 MB dump against cat reading it, from a real node dump
# repeated; best of 5 each.
repo=$(pwd)
workloads=${JITPROF_WORKLOADS:-$repo/testdata/workloads}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$work" && node --perf-prof "$workloads/newfunctions.js" 50 >/dev/null)
dump=$(ls "$work"/jit-*.dump)
go build -o "$work/jitprof" ./cmd/jitprof
{
	head -c 40 "$dump"
	body=$(($(stat -c %s "$dump") - 40))
	for _ in $(seq $((400 * 1024 * 1024 / body))); do tail -c "$body" "$dump"; done
} > "$work/big.dump"
best() {
	local best=999999
	for _ in 1 2 3 4 5; do
		local s e
		s=$(date +%s%N)
		"$@" > /dev/null
		e=$(date +%s%N)
		best=$(( (e - s) / 1000000 < best ? (e - s) / 1000000 : best ))
	done
	echo "$best"
}
cat "$work/big.dump" > /dev/null
echo "$(stat -c %s "$work/big.dump") byte dump: cat $(best cat "$work/big.dump") ms, jitprof dump --stats $(best "$work/jitprof" dump --stats --json "$work/big.dump") ms"

# jitprof inject against perf inject --jit on recordings of node (over 5,000
# functions) and Erlang (15,000): time, files and bytes, side by side.
go test -count=1 -run 'TestFasterAndSmallerThanPerf' -v ./internal/inject | grep 'functions:'

# jitprof report against perf inject --jit + perf report on a recording of
# over 100,000 samples with call chains: time and peak memory, side by side;
# then the symbolizer's and renderers' own benchmarks.
go test -count=1 -run 'TestReportSpeed' -v ./cmd/jitprof | grep 'samples, input'
go test -run '^$' -bench . -benchmem ./internal/analyze ./internal/symbolize ./internal/report ./internal/elfsym ./internal/disasm ./internal/symname
