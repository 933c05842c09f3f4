#!/bin/sh
# ./up.sh [FLAGS]: build memfs and run `memfs up FLAGS` (the store service,
# a demo store, a session and a worker mounting it; memfs up --help).
#
# The shell execs the binary once it is built, so memfs up is the process
# the terminal's Ctrl-C reaches and its exit status (0, 1, 2, 3: README,
# "Stopping and exit status") is the one the caller sees. `make up` runs
# this script too, but make answers a Ctrl-C with its own status, 130.
set -eu
repo=$(CDPATH= cd -- "$(dirname -- "$0")" && pwd)
PATH=/usr/local/go/bin:$PATH
export PATH
# -buildvcs=auto stamps the git revision that memfs version prints, even
# where GOFLAGS turns it off (outside a git checkout it stamps nothing).
# Not "go run", which turns the child's clean exit after Ctrl-C into 1.
"${GO:-go}" -C "$repo" build -buildvcs=auto -o bin/memfs ./cmd/memfs
exec "$repo/bin/memfs" up "$@"
