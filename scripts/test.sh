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
go vet ./...
go tool staticcheck ./...
go test -race -count=1 -timeout 12m ./...
# The recipe suite again, on the embedded server instead of real ZooKeeper
# (ensembles stay real ZooKeeper).
ZKTEST_SERVER=zkserver go test -race -count=1 -timeout 8m .
# A short fuzzing run of the wire decoder (the embedded server's requests).
go test -run '^$' -fuzz FuzzDecode -fuzztime 15s ./internal/jute
# And of the client's handling of server replies.
go test -run '^$' -fuzz FuzzReply -fuzztime 10s ./zkclient
