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
	[npm]=npm # Debian packages it apart from nodejs
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
	[mono]=mono-runtime
	[mcs]=mono-mcs
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
	# Wait up to 10 minutes for another apt-get or unattended-upgrades
	# rather than failing at once on the dpkg lock.
	apt=(apt-get -o DPkg::Lock::Timeout=600)
	$sudo "${apt[@]}" update -qq
	DEBIAN_FRONTEND=noninteractive $sudo "${apt[@]}" install -y -qq --no-install-recommends $(printf '%s\n' "${missing[@]}" | sort -u) >/dev/null
fi

go mod download
# Runtimes Debian does not package (Deno), from the npm registry, as the
# lock file pins them (internal/fixtures finds them in testdata/npm).
npm ci --prefix testdata/npm --no-audit --no-fund --loglevel=error
# Each stage runs whatever the ones before found (a failed test run still
# fuzzes); what failed is listed at the end, and the exit status is then 1.
failed=()
go vet ./... || failed+=("go vet")
if ! unformatted=$(gofmt -l $(git ls-files '*.go')) || [ -n "$unformatted" ]; then
	printf 'not gofmt-formatted: %s\n' $unformatted
	failed+=("gofmt")
fi
# Everything the tests need is installed above: a test that still finds a
# runtime or tool missing fails (internal/fixtures) rather than skipping.
export CI=${CI:-1}
# The summary repeats each failure's first lines (a timed-out package's
# panic and the stacks of the tests it ran), counts what passed, failed and
# was skipped and which packages failed, and lists each skip with its
# reason: a run that tested less says so.
#
# A package's tests are stopped after 20 minutes, printing every goroutine's
# stack: a hang fails with where it hangs, well within CI's 90 minutes, with
# time left for the fuzzing below. The whole suite takes about 10 minutes
# on 2 cores; its slowest package, internal/agent, builds an OpenTelemetry
# Collector (minutes on an empty module cache) and runs about 4 minutes of
# tests, which go test's default of 10 minutes would not always allow on a
# busy machine.
go test -count=1 -timeout 20m -json ./... | go run ./scripts/testsummary || failed+=("tests")

# A short fuzzing run of every fuzz target, beyond the seed corpus the
# ordinary run already replays. Go 1.26's fuzzing coordinator can end a run
# with a bare "context deadline exceeded" at the -fuzztime boundary when a
# worker is still busy (golang/go#75804, fixed in Go 1.27): no input failed
# and none was written. Such a run is tried again, up to three times (one
# retry was not enough: perfdata's FuzzReader ended so twice in a row in a
# rehearsal); any other failure, and a fourth such one, prints its output
# and fails the script at its end.
#
# Each input that reaches new code is shrunk first, for up to a minute by
# default: with seeds of a few KB that took the whole 10 s (perfdata's
# FuzzReader ran 33 inputs in 15 s, 86,883 with -fuzzminimizetime 5x). A
# failing input is written whole, unshrunk.
fuzztime=${FUZZTIME:-10s}
fuzz() {
	go test -run '^$' -fuzz "^${2}\$" -fuzztime "$fuzztime" -fuzzminimizetime 5x "$1" >"$log" 2>&1
}
log=$(mktemp)
trap 'rm -f "$log"' EXIT
for pkg in $(go list ./...); do
	for target in $(go test -list '^Fuzz' "$pkg" | grep '^Fuzz' || true); do
		echo "fuzzing $pkg $target for $fuzztime"
		ok=false
		for attempt in 1 2 3 4; do
			if fuzz "$pkg" "$target"; then
				ok=true
				break
			fi
			if ! grep -q 'context deadline exceeded' "$log" || grep -q 'Failing input written' "$log"; then
				break
			fi
			((attempt < 4)) && echo "  the run ended at its deadline with no failing input (golang/go#75804): once more"
		done
		if ! $ok; then
			cat "$log"
			failed+=("fuzzing $pkg $target")
		fi
	done
done

if ((${#failed[@]})); then
	printf 'FAILED: %s\n' "${failed[@]}"
	exit 1
fi
echo "vet, gofmt, tests and fuzzing: no failures"
