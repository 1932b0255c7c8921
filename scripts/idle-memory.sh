#!/usr/bin/env bash
# Bytes of server RSS per idle keep-alive connection: open N (10,000)
# connections, one request each, hold them idle, and report
# (RSS after - RSS before) / N.
#
# Usage: [HTTPLITE_BIN=path] scripts/idle-memory.sh [--runtime R] [--nginx]
# (HTTPLITE_BIN measures another build, e.g. one of an older commit.)
set -euo pipefail
cd "$(dirname "$0")/.."
RUNTIME=stackless
NGINX=0
while [ $# -gt 0 ]; do
    case "$1" in
        --runtime) RUNTIME=$2; shift 2 ;;
        --nginx) NGINX=1; shift ;;
        *) echo "unknown argument $1" >&2; exit 2 ;;
    esac
done
N=${N:-10000}
ulimit -n 20000
PORT=$((10000 + RANDOM % 20000))
rss_kb() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status"; }
TMP=$(mktemp -d)

if [ "$NGINX" = 1 ]; then
    command -v nginx >/dev/null || { apt-get update -qq && apt-get install -y -qq nginx-light; }
    scripts/lib/nginx-conf.sh "$TMP" "$PORT" > "$TMP/nginx.conf"
    nginx -c "$TMP/nginx.conf" -p "$TMP" &
    sleep 1
    PID=$(pgrep -P "$(cat "$TMP/nginx.pid")" | head -1) # the one worker
    NAME=nginx
else
    BIN=${HTTPLITE_BIN:-target/release/httplite}
    [ -n "${HTTPLITE_BIN:-}" ] || cargo build --release -p httplite -q
    "$BIN" --bind "127.0.0.1:$PORT" --workers 1 --runtime "$RUNTIME" \
        --idle-timeout 600s --quiet &
    PID=$!
    NAME="httplite ($RUNTIME)"
    sleep 0.5
fi
# Warm up (first-use allocations are not per-connection costs).
python3 scripts/lib/keepalive_client.py "$PORT" 100 1 >/dev/null
before=$(rss_kb "$PID")
mkfifo "$TMP/hold"
python3 scripts/lib/idle_clients.py "$PORT" "$N" 120 < "$TMP/hold" > "$TMP/clients.out" &
CLIENTS=$!
exec 3>"$TMP/hold"
for _ in $(seq 1 600); do grep -q ready "$TMP/clients.out" 2>/dev/null && break; sleep 0.2; done
grep -q ready "$TMP/clients.out" || { echo "clients did not get ready" >&2; exit 1; }
sleep 2
after=$(rss_kb "$PID")
exec 3>&-
wait "$CLIENTS" || true
if [ "$NGINX" = 1 ]; then kill -QUIT "$(cat "$TMP/nginx.pid")"; else kill -TERM "$PID"; fi
wait 2>/dev/null || true
per=$(( (after - before) * 1024 / N ))
printf '| server | RSS before (KiB) | RSS after %d idle (KiB) | bytes per idle connection |\n|---|---|---|---|\n' "$N"
printf '| %s | %s | %s | %s |\n' "$NAME" "$before" "$after" "$per"
rm -rf "$TMP"
