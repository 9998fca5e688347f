#!/usr/bin/env bash
# Runs every test of jitprof on a Debian 12 machine, first installing what the
# tests need: the real runtimes whose dumps they read and the real perf they
# compare with. Run as root, or as a user who may sudo.
set -euo pipefail
cd "$(dirname "$0")/.."

# Debian package for each command the tests run.
declare -A package_of=(
	[perf]=linux-perf
	[node]=nodejs
	[erl]=erlang-base
	[php8.2]=php8.2-cli
	[lli-14]=llvm-14
	[llvm-dwarfdump-14]=llvm-14
	[clang-14]=clang-14
	[javac]=default-jdk-headless
	[readelf]=binutils
	[gcc]=gcc
	[make]=make
	[g++]=g++
	[chromium]=chromium
	[/usr/bin/time]=time # not bash's keyword: GNU time, for peak memory
)
missing=()
for cmd in "${!package_of[@]}"; do
	command -v "$cmd" >/dev/null || missing+=("${package_of[$cmd]}")
done
dpkg -s php8.2-opcache >/dev/null 2>&1 || missing+=(php8.2-opcache)
if ((${#missing[@]})); then
	sudo=""
	[ "$(id -u)" -eq 0 ] || sudo=sudo
	echo "installing: ${missing[*]}"
	$sudo apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends $(printf '%s\n' "${missing[@]}" | sort -u) >/dev/null
fi

go mod download
go vet ./...
# Everything the tests need is installed above: a test that still finds a
# runtime or tool missing fails (internal/fixtures) rather than skipping.
export CI=${CI:-1}
# One line at the end counts what passed, failed and was skipped, and lists
# each skip with its reason: a run that tested less says so. internal/agent's
# real tier builds an OpenTelemetry Collector (minutes on an empty module
# cache) and runs about 4 minutes of tests: more than go test's default
# 10-minute limit per package allows on a busy machine.
go test -count=1 -timeout 30m -json ./... | go run ./scripts/testsummary

# A short fuzzing run of every fuzz target, beyond the seed corpus the
# ordinary run already replays. Go 1.26's fuzzing coordinator can end a run
# with a bare "context deadline exceeded" at the -fuzztime boundary when a
# worker is still busy (golang/go#75804, fixed in Go 1.27): no input failed
# and none was written. Such a run is tried once more; any other failure,
# and a second one, fails with its output.
fuzztime=${FUZZTIME:-10s}
fuzz() {
	go test -run '^$' -fuzz "^${2}\$" -fuzztime "$fuzztime" "$1" >"$log" 2>&1
}
log=$(mktemp)
trap 'rm -f "$log"' EXIT
for pkg in $(go list ./...); do
	for target in $(go test -list '^Fuzz' "$pkg" | grep '^Fuzz' || true); do
		echo "fuzzing $pkg $target for $fuzztime"
		if fuzz "$pkg" "$target"; then
			continue
		fi
		if grep -q 'context deadline exceeded' "$log" && ! grep -q 'Failing input written' "$log"; then
			echo "  the run ended at its deadline with no failing input (golang/go#75804): once more"
			fuzz "$pkg" "$target" && continue
		fi
		cat "$log"
		exit 1
	done
done
echo "fuzzing: no failures"
