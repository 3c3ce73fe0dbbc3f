#!/usr/bin/env bash
# flakegate.sh: the flake gate. Runs chosen tests with -race -count=N under two
# conditions, one after the other: a stall injector that freezes random parts of
# the test's process tree (go test, the test binary, JVMs, other children) with
# SIGSTOP/SIGCONT, then CPU load (a busy loop on every core). It prints per test
# and condition how many runs there were and how many failed. A new or changed
# timing-sensitive test passes it before it lands (issue 20).
#
#   scripts/flakegate.sh                    # Test functions changed since the merge-base with main
#   scripts/flakegate.sh -base HEAD~2       # ... changed since HEAD~2 (the work tree's edits included)
#   scripts/flakegate.sh -run '^TestFaultPings$' ./zkclient    # named tests (a -run regexp) in packages
#
# Options: -count N (default 20), -stall mild|harsh|off (harsh: 100-700 ms every
# 0.3-1.5 s; mild: 50-250 ms every 0.5-2 s), -load on|off (on), -timeout D per
# condition (15m; the condition's process tree is ended after it), -v (every test's
# output, not only the failures'). Packages are named from the repository's root.
# ZKTEST_SCALE is passed through as set.
# Exit status: 0 every run passed; 1 a run failed, or a package failed outside its
# tests (build, TestMain, timeout); 2 a usage or setup error.
# Logs (go test -json, each freeze) stay in the directory it prints.
set -euo pipefail

count=20 stall=harsh load=on timeout=15m verbose=false run="" base=""
usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2; }
while [ $# -gt 0 ]; do
	case $1 in
	-count) count=${2:?}; shift 2 ;;
	-stall) stall=${2:?}; shift 2 ;;
	-load) load=${2:?}; shift 2 ;;
	-timeout) timeout=${2:?}; shift 2 ;;
	-run) run=${2:?}; shift 2 ;;
	-base) base=${2:?}; shift 2 ;;
	-v) verbose=true; shift ;;
	-h | -help | --help) usage ;;
	-*) echo "flakegate: unknown option $1" >&2; usage ;;
	*) break ;;
	esac
done
case $stall in mild | harsh | off) ;; *) echo "flakegate: -stall mild|harsh|off" >&2; exit 2 ;; esac
case $load in on | off) ;; *) echo "flakegate: -load on|off" >&2; exit 2 ;; esac
[[ $count =~ ^[1-9][0-9]*$ ]] || { echo "flakegate: -count wants a positive number" >&2; exit 2; }
cd "$(dirname "$0")/.."

work=$(mktemp -d "${TMPDIR:-/tmp}/flakegate.XXXXXX")
hogs=()
cleanup() {
	# The busy loops are ours: end them whatever happened. The stall
	# tool thaws and ends its own tree.
	if [ ${#hogs[@]} -gt 0 ]; then kill "${hogs[@]}" 2>/dev/null || true; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# The tool (tools/testtool) is built from the tools module, outside any go.work.
GOWORK=off go -C tools build -o "$work/testtool" ./testtool
tool=$work/testtool

# Which tests: named, or the Test functions changed since base.
pkgs=("$@")
if [ -z "$run" ]; then
	if [ -z "$base" ]; then
		base=$(git merge-base HEAD main 2>/dev/null || git rev-parse HEAD)
	fi
	"$tool" changed "$base" >"$work/changed.all"
	: >"$work/changed"
	# Only packages the go command sees from here (tools/ is a module apart).
	for dir in $(awk '{print $1}' "$work/changed.all" | sort -u); do
		if go list "$dir" >/dev/null 2>&1; then
			awk -v d="$dir" '$1 == d' "$work/changed.all" >>"$work/changed"
		else
			echo "flakegate: $dir is not a package of this module or workspace: left out" >&2
		fi
	done
	if [ ! -s "$work/changed" ]; then
		echo "flakegate: no Test function changed since $base; name tests with -run REGEXP PKG..." >&2
		exit 2
	fi
	run="^($(awk '{print $2}' "$work/changed" | sort -u | paste -sd'|'))\$"
	if [ ${#pkgs[@]} -eq 0 ]; then
		mapfile -t pkgs < <(awk '{print $1}' "$work/changed" | sort -u)
	fi
	echo "flakegate: tests changed since $(git rev-parse --short "$base"):"
	sed 's/^/  /' "$work/changed"
fi
[ ${#pkgs[@]} -gt 0 ] || pkgs=(./...)

# Build first (-exec true: nothing runs), so that a build error is told
# apart and no condition spends its time compiling.
if ! go test -race -count=1 -exec true -run "$run" "${pkgs[@]}" >"$work/build.log" 2>&1; then
	cat "$work/build.log" >&2
	echo "flakegate: the tests do not build" >&2
	exit 2
fi

# The timeout in seconds, for the bounds of the stall tool and the busy loops.
secs=$(awk -v d="$timeout" 'BEGIN {
	while (match(d, /^[0-9]+[hms]/)) {
		n = substr(d, 1, RLENGTH - 1); u = substr(d, RLENGTH, 1)
		s += (u == "h") ? n * 3600 : (u == "m") ? n * 60 : n
		d = substr(d, RLENGTH + 1)
	}
	print (d == "" && s > 0) ? s : 0
}')
[ "$secs" -gt 0 ] || { echo "flakegate: -timeout wants whole h, m, s units such as 15m or 1h30m" >&2; exit 2; }
printer() { if $verbose; then "$tool" print -v; else "$tool" print; fi; }
gotest=(go test -json -race -count="$count" -timeout "$timeout" -run "$run" "${pkgs[@]}")
labels=()
rcs=()

# condition LABEL SETTING: runs the tests under the stall tool (SETTING off:
# no freezes, only its time bound and clean-up of the tree).
condition() {
	local label=$1 setting=$2 rc=0
	echo
	echo "flakegate: [$label] ${gotest[*]}  (ZKTEST_SCALE=${ZKTEST_SCALE:-unset}, $(date +%T))"
	"$tool" stall -setting "$setting" -log "$work/$label.stall.log" -timeout "$((secs + 60))s" \
		"${gotest[@]}" | tee "$work/$label.json" | printer || rc=$?
	# pipefail: rc is go test's (through the stall tool), or the printer's.
	labels+=("$label=$work/$label.json")
	rcs+=("$rc")
}

if [ "$stall" != off ]; then
	condition "stall-$stall" "$stall"
fi
if [ "$load" = on ]; then
	# A busy loop on every core, each bounded by timeout(1) should this
	# script be killed before its trap runs.
	for _ in $(seq "$(nproc)"); do
		timeout "$((secs + 120))" bash -c 'while :; do :; done' &
		hogs+=($!)
	done
	condition "cpu-load-x$(nproc)" off
	kill "${hogs[@]}" 2>/dev/null || true
	wait "${hogs[@]}" 2>/dev/null || true
	hogs=()
fi
if [ ${#labels[@]} -eq 0 ]; then
	echo "flakegate: -stall off and -load off leave nothing to run" >&2
	exit 2
fi

echo
echo "flakegate: summary (-race -count=$count -run '$run' ${pkgs[*]}; logs in $work)"
status=0
"$tool" tally "${labels[@]}" || status=$?
for i in "${!rcs[@]}"; do
	if [ "${rcs[$i]}" -ne 0 ] && [ "$status" -eq 0 ]; then
		echo "flakegate: ${labels[$i]%%=*}: go test exited ${rcs[$i]} though no test failed" >&2
		status=1
	fi
done
exit "$status"
