# A throwaway PostgreSQL cluster under /tmp for one run of the tests or the
# benchmarks. Sourced by test/run-tests.sh and test/run-bench.sh, which
# define log() and is_root and call pg_cleanup on exit.
#
#   pg_available          true when PostgreSQL's server binaries are installed
#   pg_start DB [OPTS]    initdb, start on a free port from 54329 (extra server
#                         options OPTS), create DB; sets PG_URL
#   pg_cleanup            stop the cluster and remove its directory

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

pg_cleanup() {
    if $pg_started; then
        as_pg_owner "$pg_bin/pg_ctl" -D "$pg_tmp/data" stop -m fast -s >/dev/null 2>&1 || true
        pg_started=false
    fi
    if [ -n "$pg_tmp" ]; then
        rm -rf "$pg_tmp"
        pg_tmp=""
    fi
}

port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

pg_available() {
    pg_bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
    [ -n "$pg_bin" ] && [ -x "$pg_bin/initdb" ] && ! { $is_root && ! id postgres >/dev/null 2>&1; }
}

pg_start() {
    local db=$1 opts=${2:-} port=54329 attempt
    pg_available || { log "PostgreSQL is not installed"; return 1; }
    pg_tmp=$(mktemp -d /tmp/memfs-pg.XXXXXX)
    $is_root && chown postgres: "$pg_tmp"
    as_pg_owner "$pg_bin/initdb" -D "$pg_tmp/data" -U postgres --auth=trust \
        -E UTF8 --locale=C.UTF-8 --no-sync >"$pg_tmp/initdb.log" 2>&1 || {
        cat "$pg_tmp/initdb.log" >&2; log "initdb failed"; return 1; }
    mkdir -p "$pg_tmp/sock"
    $is_root && chown postgres: "$pg_tmp/sock"
    for attempt in 1 2 3 4 5; do
        while port_in_use "$port"; do port=$((port + 1)); done
        if as_pg_owner "$pg_bin/pg_ctl" -D "$pg_tmp/data" -l "$pg_tmp/postgres.log" -w -t 60 -s start \
            -o "-c listen_addresses=127.0.0.1 -p $port -k $pg_tmp/sock -c max_connections=200 $opts"; then
            pg_started=true
            break
        fi
        port=$((port + 1))
    done
    if ! $pg_started; then
        cat "$pg_tmp/postgres.log" >&2 || true
        log "could not start PostgreSQL"
        return 1
    fi
    as_pg_owner "$pg_bin/createdb" -h 127.0.0.1 -p "$port" -U postgres "$db" || { log "createdb failed"; return 1; }
    PG_URL="postgres://postgres@127.0.0.1:$port/$db?sslmode=disable"
    log "PostgreSQL $("$pg_bin/postgres" --version | awk '{print $3}') running at $PG_URL"
}
