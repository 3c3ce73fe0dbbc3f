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
# The go line in go.mod is the oldest Go release the code needs (README,
# "Go version"); vet's stdversion check and the compiler's language-version
# gate hold the code to it. Raising it is a decision: change both.
goline=$(awk '/^go /{print $2}' go.mod)
if ! grep -q "go $goline" README.md; then
	echo "go.mod says go $goline but README.md does not say so (section \"Go version\")" >&2
	exit 1
fi
go vet ./...
# staticcheck lives in its own module (tools/) so that its newer go line is
# not the library's.
tooldir=$(mktemp -d)
trap 'rm -rf "$tooldir"' EXIT
go -C tools build -o "$tooldir/staticcheck" honnef.co/go/tools/cmd/staticcheck
"$tooldir/staticcheck" ./...
go test -race -count=1 -timeout 12m ./...
# The recipe suite again, on the embedded server instead of real ZooKeeper
# (ensembles stay real ZooKeeper).
ZKTEST_SERVER=zkserver go test -race -count=1 -timeout 8m .
# A short fuzzing run of the wire decoder (the embedded server's requests).
go test -run '^$' -fuzz FuzzDecode -fuzztime 15s ./internal/jute
# And of the client's handling of server replies.
go test -run '^$' -fuzz FuzzReply -fuzztime 10s ./zkclient
