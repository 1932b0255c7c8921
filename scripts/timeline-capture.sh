#!/usr/bin/env bash
# Captures one request's timeline on the stackless and the stackful runtime
# and renders each as SVG (docs/timeline.md shows the result):
#
#   scripts/timeline-capture.sh [OUT_DIR]     (default: docs/img)
#
# For each runtime: a release server built with `--features trace`, two
# workers, `--trace-format chrome`; one client connects, waits 200 ms (so
# that the connection parks first and the request's arrival is a wake, as
# in the README's text trace), sends `GET /_httplite/plaintext`, reads the
# answer and closes; then SIGTERM, which closes the trace file. The JSON
# files stay beside the SVGs (open them in ui.perfetto.dev).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-docs/img}
mkdir -p "$out"
cargo build --release -p httplite --features trace
bin=target/release/httplite
port=18097

for rt in stackless stackful; do
    json="$out/timeline-$rt.json"
    "$bin" --runtime "$rt" --workers 2 --bind "127.0.0.1:$port" --quiet \
        --trace-format chrome --trace-file "$json" &
    pid=$!
    trap 'kill $pid 2>/dev/null || true' EXIT
    for _ in $(seq 50); do
        python3 -c "import socket; socket.create_connection(('127.0.0.1', $port)).close()" \
            2>/dev/null && break
        sleep 0.1
    done
    # The probe connection above is in the trace too; wait it out.
    sleep 0.3
    python3 - "$port" <<'EOF'
import socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
time.sleep(0.2)
s.sendall(b"GET /_httplite/plaintext HTTP/1.1\r\nHost: t\r\n\r\n")
data = b""
while b"Hello, World!" not in data:
    chunk = s.recv(4096)
    if not chunk:
        break
    data += chunk
s.close()
assert data.startswith(b"HTTP/1.1 200"), data
EOF
    sleep 0.3
    kill -TERM "$pid"
    wait "$pid"
    trap - EXIT
    python3 scripts/timeline-svg.py "$json" "$out/timeline-$rt.svg" \
        --title "GET /_httplite/plaintext on --runtime $rt (2 workers)"
done
