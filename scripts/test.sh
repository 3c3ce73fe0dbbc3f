#!/usr/bin/env bash
# The project's test command (README): bash scripts/test.sh
#
# Installs what is missing (Debian packages), then over every module of the
# workspace (go.work's modules, or the root module alone when there is no
# go.work): gofmt, the go line check; go vet and staticcheck beside every test, once, with
# the race detector against real ZooKeeper (started by the tests themselves);
# the fault suite (TestNemesis) on its regression seeds and one random seed; the
# recipe suite again on the embedded server; the twenty slowest tests; two short
# fuzzing runs. The tools module (tools/: staticcheck, testtool) is checked and
# built on its own, with GOWORK=off.
#
# A failed test fails the script and is never run again: for a lock library an
# intermittent failure is a race until shown otherwise.
#
# Environment: ZKTEST_SCALE stretches the tests' upper time bounds (CI sets it,
# see .ci/run); NEMESIS_SEED replaces the fault suite's random seed (to replay a
# run); NEMESIS_JOBS is how many fault-suite runs go at once (3).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
root=$PWD
start=$(date +%s)
step() { echo; echo "== $* ($(date +%T), $(($(date +%s) - start)) s in)"; }

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# The workspace's modules, and a package pattern for each: one go command can
# name packages of several workspace modules (./... alone is the root module's).
if [ -f go.work ]; then
	mapfile -t moddirs < <(go list -m -f '{{.Dir}}')
else
	moddirs=("$root")
fi
pkgs=()
for d in "${moddirs[@]}"; do
	pkgs+=(".${d#"$root"}/...")
done
echo "modules: ${pkgs[*]}; ZKTEST_SCALE=${ZKTEST_SCALE:-unset} (doubled under -race)"

step "static checks: gofmt, go lines (vet and staticcheck run beside the tests)"
unformatted=$(gofmt -l .)
if [ -n "$unformatted" ]; then
	echo "gofmt would change: $unformatted" >&2
	exit 1
fi
# Each module's go line is the oldest Go release its code needs, and the
# README says which ("go 1.24.0"); vet's stdversion check and the compiler's
# language-version gate hold the code to it. Raising one is a decision:
# change both.
for d in "${moddirs[@]}"; do
	goline=$(awk '/^go /{print $2}' "$d/go.mod")
	if ! grep -qF "go $goline" README.md; then
		rel=${d#"$root"}
		echo "${rel#/}${rel:+/}go.mod says go $goline but README.md does not say so" >&2
		exit 1
	fi
done
# testtool prints the test runs below; built first.
GOWORK=off go -C tools build -o "$out/testtool" ./testtool

# vet and staticcheck, which compile and analyse every package (minutes, on
# a cold build cache), run beside the race run below, whose tests mostly
# wait; their output is shown when the race run is done, and their failure
# fails the script as if they had run first.
static() {
	go vet "$@"
	# staticcheck and testtool live in their own module (tools/) so that
	# its newer go line and its dependencies are not the library's.
	GOWORK=off go -C tools build -o "$out/staticcheck" honnef.co/go/tools/cmd/staticcheck
	"$out/staticcheck" "$@"
	GOWORK=off go -C tools vet ./...
	(cd tools && GOWORK=off "$out/staticcheck" ./...)
	GOWORK=off go -C tools test -count=1 ./...
}

# Test runs write go test -json to $out/LABEL.json and show go test's own text
# (failures in full, one line per package). jsons feeds the slowest list.
jsons=()
slowest() {
	step "the twenty slowest tests"
	"$out/testtool" slowest -n 20 "${jsons[@]}"
}
# failed LABEL: ends the script after a failed run, with the slowest list and
# then go test's closing lines of that run again.
failed() {
	slowest
	echo
	echo "== $1 failed; its failures:"
	# (With each failed test's own lines, "    file.go:N: ...", which a
	# report of the run's tail would otherwise not show.)
	"$out/testtool" print <"$out/$1.json" | grep -E '^(--- FAIL|FAIL|ok  |panic: |--- UNFINISHED)|^ +[^ ]+\.go:[0-9]+: ' | cut -c1-600 | head -300 || true
	exit 1
}
# gotest LABEL ARGS...: go test -json ARGS, shown as go test shows it.
gotest() {
	local label=$1 rc=0
	shift
	jsons+=("$label=$out/$label.json")
	go test -json "$@" | tee "$out/$label.json" | "$out/testtool" print || rc=$?
	[ "$rc" -eq 0 ] || failed "$label"
}

# The tests mostly wait (for sessions to expire, events, child processes):
# run alone, the root package and cmd/zkr use about 0.4 of a core each. So
# the race run takes four packages at once (TEST_P), and the recipe suite
# runs on the embedded server beside it (ensembles stay real ZooKeeper);
# its output is shown when the race run is done.
step "tests, with the race detector, on real ZooKeeper; the recipe suite on the embedded server beside them"
jsons+=("zkserver=$out/zkserver.json")
# (In a process group of its own, so that a failure above ends all of it.)
setsid bash -c 'rc=0; ZKTEST_SERVER=zkserver go test -json -race -count=1 -timeout 12m . >"$1" 2>&1 || rc=$?; echo "$rc" >"$2"' \
	_ "$out/zkserver.json" "$out/zkserver.rc" &
embedded=$!
# (static.rc is written only if every check passed.)
out=$out setsid bash -c "set -euo pipefail; $(declare -f static); exec >$out/static.log 2>&1; static \"\$@\"; echo 0 >$out/static.rc" \
	_ "${pkgs[@]}" &
static=$!
trap 'kill -- -"$embedded" -"$static" 2>/dev/null || true; rm -rf "$out"' EXIT
gotest race -p "${TEST_P:-4}" -race -count=1 -timeout 12m -skip '^TestNemesis$' "${pkgs[@]}"
wait "$static" || true
step "go vet and staticcheck (run beside the above)"
cat "$out/static.log"
[ -f "$out/static.rc" ] || { echo "== the static checks failed" >&2; exit 1; }
wait "$embedded" || true
step "the recipe suite on the embedded server (run beside the above)"
"$out/testtool" print <"$out/zkserver.json" || true
[ "$(cat "$out/zkserver.rc")" = 0 ] || failed zkserver

# The fault suite: the seeds that once found a fault, and one random seed, each
# a run of about a minute (40 s of faults, then the checks), NEMESIS_JOBS at
# once from one test binary.
step "the fault suite (TestNemesis)"
seeds=(3 7 13 2704667788654528 1057048518516494 5413012982913397 8564367160994920)
random=${NEMESIS_SEED:-$(($(od -An -N6 -tu8 /dev/urandom) + 1))}
echo "random seed $random; replay a seed with: go test -race -run '^TestNemesis\$' -v . -args -nemesis.seed SEED"
go test -race -c -o "$out/nemesis.test" .
rootpkg=$(go list .)
nemesis() {
	local seed=$1 rc=0 t0=$SECONDS
	go tool test2json -t -p "$rootpkg" "$out/nemesis.test" -test.v=test2json -test.run '^TestNemesis$' \
		-test.count=1 -test.timeout 10m -nemesis.seed "$seed" -nemesis.duration 40s \
		>"$out/nemesis-$seed.json" 2>&1 || rc=$?
	echo "$rc $((SECONDS - t0))" >"$out/nemesis-$seed.rc"
}
for seed in "${seeds[@]}" "$random"; do
	while [ "$(jobs -rp | wc -l)" -ge "${NEMESIS_JOBS:-3}" ]; do wait -n || true; done
	echo "seed $seed: started $(date +%T)"
	nemesis "$seed" &
done
wait
nfailed=()
# (They stay out of the slowest list, which they would fill: each takes the
# time on its line.)
for seed in "${seeds[@]}" "$random"; do
	"$out/testtool" print <"$out/nemesis-$seed.json"
	read -r rc took <"$out/nemesis-$seed.rc"
	if [ "$rc" = 0 ]; then
		echo "ok  	$rootpkg	${took}s	TestNemesis -nemesis.seed $seed"
	else
		echo "FAIL	$rootpkg	${took}s	TestNemesis -nemesis.seed $seed"
		nfailed+=("$seed")
	fi
done
if [ ${#nfailed[@]} -gt 0 ]; then
	slowest
	echo
	echo "== the fault suite failed for seed(s) ${nfailed[*]}; replay: go test -race -run '^TestNemesis\$' -v . -args -nemesis.seed SEED"
	# Why, last, where a report of the run's tail shows it: the timelines
	# above can push the violations' own lines out of sight.
	for seed in "${nfailed[@]}"; do
		echo "-- seed $seed:"
		"$out/testtool" print <"$out/nemesis-$seed.json" |
			grep -E 'violation at|violations \(rerun|could not be carried out|leaked goroutines|panic:|test timed out' | cut -c1-2000 | head -20 || true
	done
	exit 1
fi

slowest

# A short fuzzing run of the wire decoder (the embedded server's requests).
step "fuzzing"
go test -run '^$' -fuzz FuzzDecode -fuzztime 15s ./internal/jute
# And of the client's handling of server replies.
go test -run '^$' -fuzz FuzzReply -fuzztime 10s ./zkclient
