#!/usr/bin/env bash
# Captures one request's timeline on the stackless and the stackful runtime,
# and one directory listing (a request that waits for the blocking pool) on
# the stackless one, and renders each as SVG (docs/timeline.md shows them):
#
#   scripts/timeline-capture.sh [OUT_DIR] [CASE...]   (default: docs/img, every case)
#
# Cases: `stackless`, `stackful` (GET /_httplite/plaintext) and `listing`
# (GET /sub/ of a small --root with --list-dirs, on stackless). For each: a
# release server built with `--features trace`, two workers,
# `--trace-format chrome`; one client connects, waits 200 ms (so that the
# connection parks first and the request's arrival is a wake, as in the
# text trace in docs/server.md), sends the request, reads the answer and closes; then
# SIGTERM, which closes the trace file. The JSON files stay beside the SVGs
# (open them in ui.perfetto.dev).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-docs/img}
shift || true
cases=("$@")
[ ${#cases[@]} -gt 0 ] || cases=(stackless stackful listing)
mkdir -p "$out"
cargo build --release -p httplite --features trace
bin=target/release/httplite
port=18097
site=$(mktemp -d)
trap 'rm -rf "$site"' EXIT
mkdir -p "$site/sub"
for f in a.txt b.txt c.txt; do echo "$f" > "$site/sub/$f"; done

for case in "${cases[@]}"; do
    case $case in
        stackless | stackful) rt=$case path=/_httplite/plaintext extra=() ;;
        listing) rt=stackless path=/sub/ extra=(--root "$site" --list-dirs) ;;
        *) echo "unknown case $case (stackless, stackful, listing)" >&2; exit 2 ;;
    esac
    json="$out/timeline-$case.json"
    "$bin" --runtime "$rt" --workers 2 --bind "127.0.0.1:$port" --quiet \
        --trace-format chrome --trace-file "$json" "${extra[@]}" &
    pid=$!
    trap 'kill $pid 2>/dev/null || true; rm -rf "$site"' EXIT
    for _ in $(seq 50); do
        python3 -c "import socket; socket.create_connection(('127.0.0.1', $port)).close()" \
            2>/dev/null && break
        sleep 0.1
    done
    # The probe connection above is in the trace too; wait it out.
    sleep 0.3
    python3 - "$port" "$path" <<'PY'
import socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
time.sleep(0.2)
s.sendall(f"GET {sys.argv[2]} HTTP/1.1\r\nHost: t\r\n\r\n".encode())
data = b""
while True:
    head, sep, body = data.partition(b"\r\n\r\n")
    if sep:
        length = next((int(l.split(b":")[1]) for l in head.split(b"\r\n")
                       if l.lower().startswith(b"content-length:")), 0)
        if len(body) >= length:
            break
    chunk = s.recv(4096)
    if not chunk:
        break
    data += chunk
s.close()
assert data.startswith(b"HTTP/1.1 200"), data
PY
    sleep 0.3
    kill -TERM "$pid"
    wait "$pid"
    trap 'rm -rf "$site"' EXIT
    python3 scripts/timeline-svg.py "$json" "$out/timeline-$case.svg" --path "$path" \
        --title "GET $path on --runtime $rt (2 workers)"
done
