#!/usr/bin/env bash
# Measures a mount of a store seeded by test/scale (see test/scale/README.md):
# seconds until `ls -l` of the root answers, until every content is fetched
# (the mount's "memory contents fetched" line, as memfs status shows it), the
# mount's VmRSS then, and `ls -lR | wc -l` and `grep -r` times.
# Usage: run.sh MEMFS API_URL KEY_FILE STORE_ID WORKDIR
set -euo pipefail
memfs=$1 api=$2 key=$3 sid=$4 work=$5
mnt=$work/mnt state=$work/state log=$work/mount.log
mkdir -p "$mnt" "$state"
now() { date +%s.%N; }
since() { echo "$(now) - $1" | bc; }
t0=$(now)
"$memfs" mount --api-url "$api" --api-key-file "$key" --store "$sid" --state-dir "$state" "$mnt" 2>"$log" &
pid=$!
until ls -l "$mnt" 2>/dev/null | grep -q f000; do sleep 0.05; done
echo "mount until ls -l of the root: $(since "$t0") s"
until grep -q "memory contents fetched" "$log"; do sleep 0.1; done
echo "mount until all content fetched: $(since "$t0") s"
"$memfs" status --state-dir "$state" | grep -i content || true
echo "VmRSS after fetch: $(awk '/VmRSS/{print $2, $3}' /proc/$pid/status)"
t=$(now); n=$(ls -lR "$mnt" | wc -l); echo "ls -lR | wc -l: $n lines in $(since "$t") s"
t=$(now); n=$(grep -r needle "$mnt" | wc -l); echo "grep -r needle: $n hits in $(since "$t") s"
t=$(now); n=$(grep -r needle "$mnt" | wc -l); echo "grep -r needle again (warm): $n hits in $(since "$t") s"
umount "$mnt"
wait "$pid" || echo "memfs mount exited $?"
