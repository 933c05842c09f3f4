#!/usr/bin/env bash
# Sets up everything the tests need on a fresh Debian bookworm machine, then
# runs them. Usage:
#   bash test/run-tests.sh                          # lint, whole suite (+ GOMAXPROCS=1 pass)
#   bash test/run-tests.sh -run TestFoo ./store/... # args replace the default ./...; no lint
#
# A full run first lints the tree (test/lint.sh: go vet, gofmt -l and the
# staticcheck pinned in go.mod); any finding fails the run before a test
# starts. A run with arguments is a developer's targeted run and skips it.
#
# Set MEMFS_TEST_POSTGRES_URL to use an existing PostgreSQL instead of the
# throwaway cluster this script starts.
set -euo pipefail

export PATH=/usr/local/go/bin:$PATH
cd "$(dirname "${BASH_SOURCE[0]}")/.."

log() { echo "run-tests: $*" >&2; }

is_root=false
[ "$(id -u)" -eq 0 ] && is_root=true

# --- 1. System packages ------------------------------------------------------
# gcc/libc6-dev are needed by `go test -race` (cgo); systemd brings
# systemd-analyze, which verifies the unit files in deploy/systemd (it runs
# without systemd as PID 1; deploy's tests fail under CI=true without it);
# strace injects syscall faults (test/journal_fault_test.go, test/up_fail_test.go);
# bubblewrap makes the agent's sandbox (--run-tools; test/tools_*_test.go).
if $is_root && command -v apt-get >/dev/null 2>&1; then
    missing=()
    for pkg in postgresql fuse3 gcc libc6-dev systemd strace bubblewrap; do
        if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed'; then
            missing+=("$pkg")
        fi
    done
    if [ ${#missing[@]} -gt 0 ]; then
        log "installing: ${missing[*]}"
        export DEBIAN_FRONTEND=noninteractive
        aptlog=$(mktemp)
        if ! { apt-get update -qq && apt-get install -y -qq --no-install-recommends "${missing[@]}"; } >"$aptlog" 2>&1; then
            cat "$aptlog" >&2
            rm -f "$aptlog"
            log "apt-get failed"
            exit 1
        fi
        rm -f "$aptlog"
    fi
fi

# --- 2. Lint (full runs only) -------------------------------------------------
# Before PostgreSQL starts, so that a finding fails the run at once.
if [ $# -eq 0 ]; then
    if ! bash test/lint.sh; then
        log "lint failed; no tests run"
        exit 1
    fi
fi

# --- 3. Throwaway PostgreSQL cluster -----------------------------------------
# Durability is off (fsync, synchronous_commit, full_page_writes): a test
# run's database is thrown away, and the tests must not depend on disk speed.
. test/pg.sh
trap pg_cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

if [ -z "${MEMFS_TEST_POSTGRES_URL:-}" ]; then
    if ! pg_available; then
        if [ "${CI:-}" = "true" ]; then
            log "ERROR: PostgreSQL is not available (no /usr/lib/postgresql/*/bin) and CI=true"
            exit 1
        fi
        log "WARNING: PostgreSQL not found and MEMFS_TEST_POSTGRES_URL unset;"
        log "WARNING: PostgreSQL tests will be SKIPPED. Run as root to auto-install it."
    else
        pg_start memfs_test "-c fsync=off -c synchronous_commit=off -c full_page_writes=off" || exit 1
        export MEMFS_TEST_POSTGRES_URL="$PG_URL"
    fi
else
    log "using MEMFS_TEST_POSTGRES_URL from environment"
fi

# --- 4. Tests ------------------------------------------------------------------
if [ $# -gt 0 ]; then
    pkgs=("$@")
else
    pkgs=(./...)
fi

status=0
go test -race -count=1 -timeout 25m "${pkgs[@]}" || status=$?

# Second pass with GOMAXPROCS=1 (only for a full run that passed) over the
# packages most sensitive to scheduling.
if [ $# -eq 0 ] && [ "$status" -eq 0 ]; then
    gm_pkgs=()
    for d in test fs; do
        if [ -d "$d" ] && [ -n "$(find "$d" -name '*_test.go' -print -quit)" ]; then
            gm_pkgs+=("./$d/...")
        fi
    done
    if [ ${#gm_pkgs[@]} -gt 0 ]; then
        log "second pass with GOMAXPROCS=1: ${gm_pkgs[*]}"
        GOMAXPROCS=1 go test -count=1 -timeout 15m "${gm_pkgs[@]}" || status=$?
    fi
fi

exit "$status"
