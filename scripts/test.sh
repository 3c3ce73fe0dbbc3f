#!/usr/bin/env bash
# The project's test command: static checks, then every test with the race
# detector against real ZooKeeper (started by the tests themselves).
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
