#!/usr/bin/env bash
# Checks the whole tree with go vet, gofmt and staticcheck; any finding
# fails, printed. test/run-tests.sh runs it before a full test run; run it
# alone with: bash test/lint.sh
#
# staticcheck is pinned in go.mod as a tool dependency (the "tool" line);
# "go tool staticcheck" builds that version into Go's cache on first use,
# so nothing is installed outside the module cache. Its checks are its
# defaults (no staticcheck.conf). Analysis is cached (~/.cache/staticcheck), so a second run over an
# unchanged tree takes seconds.
set -euo pipefail

export PATH=/usr/local/go/bin:$PATH
cd "$(dirname "${BASH_SOURCE[0]}")/.."

log() { echo "lint: $*" >&2; }

status=0

log "go vet ./..."
go vet ./... || { log "go vet reported the findings above"; status=1; }

log "gofmt -l ."
unformatted=$(gofmt -l .)
if [ -n "$unformatted" ]; then
    log "not gofmt-formatted (run gofmt -w on them):"
    printf '%s\n' "$unformatted" >&2
    status=1
fi

log "go tool staticcheck ./..."
go tool staticcheck ./... || { log "staticcheck reported the findings above"; status=1; }

if [ "$status" -ne 0 ]; then
    log "FAILED"
fi
exit "$status"
