#!/usr/bin/env bash
# Sets up everything the tests need on a fresh Debian bookworm machine, then
# runs them. Usage:
#   bash test/run-tests.sh                          # whole suite (+ GOMAXPROCS=1 pass)
#   bash test/run-tests.sh -run TestFoo ./store/... # args replace the default ./...
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
# without systemd as PID 1; deploy's tests fail under CI=true without it).
if $is_root && command -v apt-get >/dev/null 2>&1; then
    missing=()
    for pkg in postgresql fuse3 gcc libc6-dev systemd; do
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

# --- 2. Throwaway PostgreSQL cluster -----------------------------------------
pg_tmp=""
pg_bin=""
pg_started=false

# Runs a command as the cluster owner (postgres when root, else ourselves),
# from a directory that user can read.
as_pg_owner() {
    if $is_root; then
        (cd / && runuser -u postgres -- "$@")
    else
        (cd / && "$@")
    fi
}

cleanup() {
    if $pg_started; then
        as_pg_owner "$pg_bin/pg_ctl" -D "$pg_tmp/data" stop -m fast -s >/dev/null 2>&1 || true
    fi
    if [ -n "$pg_tmp" ]; then
        rm -rf "$pg_tmp"
    fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

if [ -z "${MEMFS_TEST_POSTGRES_URL:-}" ]; then
    pg_bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
    if [ -z "$pg_bin" ] || [ ! -x "$pg_bin/initdb" ] || { $is_root && ! id postgres >/dev/null 2>&1; }; then
        if [ "${CI:-}" = "true" ]; then
            log "ERROR: PostgreSQL is not available (no /usr/lib/postgresql/*/bin) and CI=true"
            exit 1
        fi
        log "WARNING: PostgreSQL not found and MEMFS_TEST_POSTGRES_URL unset;"
        log "WARNING: PostgreSQL tests will be SKIPPED. Run as root to auto-install it."
        pg_bin=""
    else
        pg_tmp=$(mktemp -d /tmp/memfs-pg.XXXXXX)
        $is_root && chown postgres: "$pg_tmp"
        as_pg_owner "$pg_bin/initdb" -D "$pg_tmp/data" -U postgres --auth=trust \
            -E UTF8 --locale=C.UTF-8 --no-sync >"$pg_tmp/initdb.log" 2>&1 || {
            cat "$pg_tmp/initdb.log" >&2; log "initdb failed"; exit 1; }
        mkdir -p "$pg_tmp/sock"
        $is_root && chown postgres: "$pg_tmp/sock"

        port=54329
        for attempt in 1 2 3 4 5; do
            while port_in_use "$port"; do port=$((port + 1)); done
            if as_pg_owner "$pg_bin/pg_ctl" -D "$pg_tmp/data" -l "$pg_tmp/postgres.log" -w -t 60 -s start \
                -o "-c listen_addresses=127.0.0.1 -p $port -k $pg_tmp/sock -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200"; then
                pg_started=true
                break
            fi
            port=$((port + 1))
        done
        if ! $pg_started; then
            cat "$pg_tmp/postgres.log" >&2 || true
            log "could not start PostgreSQL"
            exit 1
        fi
        as_pg_owner "$pg_bin/createdb" -h 127.0.0.1 -p "$port" -U postgres memfs_test
        export MEMFS_TEST_POSTGRES_URL="postgres://postgres@127.0.0.1:$port/memfs_test?sslmode=disable"
        log "PostgreSQL $("$pg_bin/postgres" --version | awk '{print $3}') running at $MEMFS_TEST_POSTGRES_URL"
    fi
else
    log "using MEMFS_TEST_POSTGRES_URL from environment"
fi

# --- 3. Tests ------------------------------------------------------------------
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
