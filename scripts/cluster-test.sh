#!/usr/bin/env bash
# Three httplite instances behind HAProxy (Debian's haproxy, installed here
# if missing), under a checked load for SECONDS, through a rolling upgrade
# (SIGUSR2), a SIGTERM and restart (the drain delay takes the instance out
# of HAProxy's health checks first), logrotate with SIGHUP, and a SIGKILL;
# prints requests sent, verified, failed and connection errors per step
# (scripts/lib/cluster_test.py). Exit 1 if steps 1-3 lost any request.
#
# HAProxy checks /_httplite/health every 300 ms (down after 2 failures, up
# after 2 successes) and retries a request whose connection failed or got
# no answer (retry-on conn-failure empty-response) on another instance.
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

cat > "$work/haproxy.cfg" <<'CFG'
global
    maxconn 4096
defaults
    mode http
    timeout connect 2s
    timeout client 30s
    timeout server 30s
    retries 3
    option redispatch 1
    retry-on conn-failure empty-response response-timeout
frontend web
    bind 127.0.0.1:18180
    default_backend httplite
backend httplite
    balance roundrobin
    option httpchk GET /_httplite/health
    http-check expect status 200
    default-server inter 300ms fall 2 rise 2
    server a 127.0.0.1:18181 check
    server b 127.0.0.1:18182 check
    server c 127.0.0.1:18183 check
CFG
haproxy -f "$work/haproxy.cfg" -db >"$work/haproxy.log" 2>&1 &
haproxy_pid=$!
python3 scripts/lib/cluster_test.py "$bin" "$work" "$seconds"
