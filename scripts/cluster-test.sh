#!/usr/bin/env bash
# Three httplite instances behind HAProxy (Debian's haproxy, installed here
# if missing), under a checked load for SECONDS, through a rolling upgrade
# (SIGUSR2), a SIGTERM and restart (the drain delay takes the instance out
# of HAProxy's health checks first), logrotate with SIGHUP, and a SIGKILL;
# prints requests sent, verified, failed and connection errors per step
# (scripts/lib/cluster_test.py). Exit 1 if steps 1-3 lost any request.
#
# HAProxy checks /healthz (--health) every 300 ms (down after 2 failures, up
# after 2 successes) and retries a request whose connection failed or got
# no answer (retry-on conn-failure empty-response) on another instance.
# It speaks PROXY protocol v2 to the instances (send-proxy-v2, and
# check-send-proxy for the checks: LOCAL headers), which take it with
# --proxy-protocol --trusted-proxy 127.0.0.1/32; the client connects from
# 127.0.0.2, so the access logs must show 127.0.0.2 for every request (and
# 127.0.0.1, the checks' own peer, for the health checks). Afterwards every
# verified request must be in the logs exactly once (each carries an id).
#
# Usage: scripts/cluster-test.sh [--quick]    (60 s; --quick: 20 s, in CI)
# Run it under the machine's heavy-work lock: it builds and loads.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=60
[ "${1:-}" = --quick ] && seconds=20

if ! command -v haproxy >/dev/null; then
    echo "==> installing haproxy (needed by scripts/cluster-test.sh)"
    if [ "$(id -u)" = 0 ]; then
        apt-get update -qq && apt-get install -y -qq haproxy >/dev/null
    else
        sudo apt-get update -qq && sudo apt-get install -y -qq haproxy >/dev/null
    fi
fi
cargo build -q -p httplite
bin=$PWD/target/debug/httplite

work=$(mktemp -d /tmp/httplite-cluster.XXXXXX)
haproxy_pid=
cleanup() {
    [ -n "$haproxy_pid" ] && kill "$haproxy_pid" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

# The HAProxy configuration is the one docs/deploy.md shows (between its
# cluster-test markers): read from there, so the two cannot drift apart.
sed -n '/<!-- cluster-test haproxy.cfg: begin -->/,/<!-- cluster-test haproxy.cfg: end -->/p' \
    docs/deploy.md | sed '/^<!--/d; /^```/d' > "$work/haproxy.cfg"
if ! grep -q send-proxy-v2 "$work/haproxy.cfg"; then
    echo "cluster-test: no HAProxy configuration between the markers of docs/deploy.md" >&2
    exit 1
fi
haproxy -f "$work/haproxy.cfg" -db >"$work/haproxy.log" 2>&1 &
haproxy_pid=$!
python3 scripts/lib/cluster_test.py "$bin" "$work" "$seconds"
