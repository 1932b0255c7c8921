#!/usr/bin/env bash
# System calls per plaintext request at keep-alive concurrency C (256),
# counted by `strace -c -f` on the whole server process.
#
# The server (one worker, pinned to CPU 0) runs twice under strace, serving
# N1 and N2 requests from h2load (HTTP/1.1, C keep-alive connections,
# pinned to CPU 1); (calls(N2) - calls(N1)) / (N2 - N1) cancels start-up
# and shutdown. The busiest calls are listed for the larger run.
#
# Usage: scripts/syscalls-per-request.sh [--runtime R]...   (several allowed)
set -euo pipefail
cd "$(dirname "$0")/.."
RUNTIMES=()
while [ $# -gt 0 ]; do
    case "$1" in
        --runtime) RUNTIMES+=("$2"); shift 2 ;;
        *) echo "unknown argument $1" >&2; exit 2 ;;
    esac
done
[ ${#RUNTIMES[@]} -gt 0 ] || RUNTIMES=(stackless uring)
C=${C:-256}
N1=${N1:-20000}
N2=${N2:-120000}
command -v strace >/dev/null || { apt-get update -qq && apt-get install -y -qq strace; }
command -v h2load >/dev/null || { apt-get update -qq && apt-get install -y -qq nghttp2-client; }
if [ -n "${HTTPLITE_BIN:-}" ]; then
    BIN=$HTTPLITE_BIN
else
    cargo build --release -p httplite -q
    BIN=target/release/httplite
fi
ulimit -n 20000
OUT=$(mktemp -d)
PORT_BASE=$((10000 + RANDOM % 20000))
i=0

count() { # runtime n -> total calls (and $OUT/strace.$1.$2 kept)
    local rt=$1 n=$2 port=$((PORT_BASE + i)) f="$OUT/strace.$1.$2"
    i=$((i + 1))
    taskset -c 0 strace -c -f -o "$f" "$BIN" --bind "127.0.0.1:$port" --workers 1 \
        --runtime "$rt" --quiet &
    local pid=$!
    for _ in $(seq 1 100); do
        (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
        sleep 0.1
    done
    taskset -c 1 h2load --h1 -n "$n" -c "$C" -t 1 "http://127.0.0.1:$port/_httplite/plaintext" \
        > "$OUT/h2load.$rt.$n" 2>&1
    grep -q "succeeded, 0 failed" "$OUT/h2load.$rt.$n" || grep -E "^requests:" "$OUT/h2load.$rt.$n" >&2
    # strace's own pid is $pid; the server is its child: stop the server.
    pkill -TERM -P "$pid" || true
    wait "$pid" || true
    # Columns: % time, seconds, usecs/call, calls, [errors], syscall.
    awk '$NF == "total" {print $4; exit}' "$f"
}

printf '| runtime | requests (N2 - N1) | connections | system calls per request | top calls (N2 run) |\n|---|---|---|---|---|\n'
for rt in "${RUNTIMES[@]}"; do
    a=$(count "$rt" "$N1")
    b=$(count "$rt" "$N2")
    per=$(python3 -c "print(f'{($b - $a) / ($N2 - $N1):.3f}')")
    top=$(awk 'NR > 2 && $NF != "total" && $1 !~ /^-/ {print $NF ":" $4}' \
        "$OUT/strace.$rt.$N2" | sort -t: -k2 -rn | head -4 | tr '\n' ' ')
    printf '| %s | %d | %d | %s | %s |\n' "$rt" $((N2 - N1)) "$C" "$per" "$top"
done
rm -rf "$OUT"
