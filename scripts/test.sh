#!/usr/bin/env bash
# The project's test command: installs what is missing (Debian packages),
# static checks, then every test with the race detector against real
# ZooKeeper (started by the tests themselves), the recipe suite once more
# on the embedded server, and a short fuzzing run.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
unformatted=$(gofmt -l .)
if [ -n "$unformatted" ]; then
	echo "gofmt would change: $unformatted" >&2
	exit 1
fi
# The workspace (go.work) joins the library module and the modules of the
# command, the Kerberos provider and the go-zookeeper/zk comparisons; one
# pattern per module names every package of all of them ("./..." alone
# stops at a nested module).
pkgs=(./... ./cmd/zkr/... ./internal/gozk/... ./zkclient/kerberos/...)
# The go line in go.mod is the oldest Go release the code needs (README,
# "Go version"); vet's stdversion check and the compiler's language-version
# gate hold the code to it. Raising it is a decision: change both. Every
# module of the workspace, and go.work, has the same line.
goline=$(awk '/^go /{print $2}' go.mod)
if ! grep -q "go $goline" README.md; then
	echo "go.mod says go $goline but README.md does not say so (section \"Go version\")" >&2
	exit 1
fi
for mod in go.work cmd/zkr/go.mod internal/gozk/go.mod zkclient/kerberos/go.mod; do
	if [ "$(awk '/^go /{print $2}' "$mod")" != "$goline" ]; then
		echo "$mod does not say go $goline as go.mod does" >&2
		exit 1
	fi
done
go vet "${pkgs[@]}"
# staticcheck lives in its own module (tools/), outside the workspace, so
# that its newer go line is not the library's.
tooldir=$(mktemp -d)
trap 'rm -rf "$tooldir"' EXIT
GOWORK=off go -C tools build -o "$tooldir/staticcheck" honnef.co/go/tools/cmd/staticcheck
"$tooldir/staticcheck" "${pkgs[@]}"
go test -race -count=1 -timeout 12m "${pkgs[@]}"
# The recipe suite again, on the embedded server instead of real ZooKeeper
# (ensembles stay real ZooKeeper).
ZKTEST_SERVER=zkserver go test -race -count=1 -timeout 8m .
# A short fuzzing run of the wire decoder (the embedded server's requests).
go test -run '^$' -fuzz FuzzDecode -fuzztime 15s ./internal/jute
# And of the client's handling of server replies.
go test -run '^$' -fuzz FuzzReply -fuzztime 10s ./zkclient
