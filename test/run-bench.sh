#!/usr/bin/env bash
# Runs the benchmark program: go run ./test/bench "$@" (make bench). Run it as
# root: the F, S, M1 and X1 measures mount FUSE filesystems.
#
# D1, Q1 and X1 measure PostgreSQL (D1 and X1 SQLite too). With
# MEMFS_BENCH_POSTGRES_URL unset and PostgreSQL installed (make test
# installs it), this starts a throwaway cluster for the run with
# PostgreSQL's default, durable settings (fsync and synchronous_commit on,
# as a deployment runs it; the test cluster turns them off) and removes it
# afterwards. Without PostgreSQL their PostgreSQL rows say they were
# skipped.
set -euo pipefail

export PATH=/usr/local/go/bin:$PATH
cd "$(dirname "${BASH_SOURCE[0]}")/.."

log() { echo "run-bench: $*" >&2; }

is_root=false
[ "$(id -u)" -eq 0 ] && is_root=true

. test/pg.sh
trap pg_cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

if [ -z "${MEMFS_BENCH_POSTGRES_URL:-}" ] && pg_available; then
    pg_start memfs_bench && export MEMFS_BENCH_POSTGRES_URL="$PG_URL" ||
        log "WARNING: no PostgreSQL for D1, Q1 and X1; their rows will say skipped"
fi

go run ./test/bench "$@"
