#!/usr/bin/env bash
# HTTPS: httplite against nginx, H2O and lighttpd (all three on OpenSSL 3),
# each row with its goal, cleartext figures beside the TLS ones.
#
# Every server gets one worker (one thread), no access log, the same root (a
# temp dir with a 1 KiB and a 16 MiB file of random bytes), the same ECDSA
# P-256 certificate (made here with openssl, self-signed, thrown away at the
# end), TLS 1.2 and 1.3 and its own default cipher preference (all four put
# AES-GCM first for clients with AES instructions), resumption by session
# cache and ticket on, and a 127.0.0.1 port of its own. The server runs on
# CPU 0, every client on CPU 1.
#
# Saturated rows, as ratios with a 95 % confidence interval. All four
# servers run at once, each in a cgroup of its own (scripts/lib/cpu-cap.sh)
# capped at a share of CPU 0, so that the server is the bottleneck and its
# CPU per connection (or request) is the cost at full load; the cgroup
# counts the server's CPU. wrk's side of TLS costs more CPU than a server's
# (a full handshake: about twice), and one client core saturates a server
# only below about 15 % of a core, hence the cap of 10 %: lower than the
# other scripts' 50 %, so a server runs 1 ms of every 10 ms period, from
# colder caches; the same for every server. After a warm-up of each, --slices passes give
# each server in turn (rotated every pass) one --slice of load; a slice's
# figure is the cgroup's CPU time over what the client completed. The
# ratio of httplite to a peer is formed per pass (the two slices at most
# three slices apart, so that a slow spell of the host lands on both) and
# bootstrapped (scripts/lib/ratio_ci.py); a goal is met when the interval's
# upper bound meets it. A slice in which the cgroup throttled the server in
# under 80 % of the periods was not saturated: the table says how many.
#   full handshakes: `wrk -t1 -c64 -H "Connection: close"` over TLS 1.3
#       (wrk's OpenSSL offers TLS 1.3 and the servers choose it), a new
#       connection and a full handshake per request. wrk resumes the
#       session of the connection it replaces (SSL_clear keeps it), so it
#       runs with scripts/lib/wrk_noresume.c preloaded, which drops it.
#       Server CPU µs per connection.
#   resumed handshakes: `wrk -t1 -c16 -H "Connection: close"` without the
#       shim: each of its 16 connection slots makes one full handshake, then
#       resumes (TLS 1.3 PSK with a fresh ECDHE share) on every reconnect.
#       A slice's figure leaves those 16 out: its CPU minus 16 times the
#       server's median full handshake (the row above), over the resumed
#       connections. 16 connections keep that correction to a few % of a
#       slice and still saturate the capped server. httplite's own counters
#       (/_httplite/stats) are logged after each row as proof of the kind.
#   1 KiB keep-alive, 64 connections: `wrk -t1 -c64` over https, server
#       CPU µs/request.
# Open rows, one server at a time, uncapped, median over --rounds:
#   1 KiB keep-alive over cleartext http (server CPU µs/request, uncapped:
#       beside the https row for the cost of TLS, not for ranking);
#   16 MiB, 8 connections: throughput MB/s (10^6 bytes), https and http;
#   bytes per idle keep-alive TLS connection: N connections (default
#       10,000) each make one request and stay open; (server RSS after -
#       RSS before) / N, from VmRSS summed over the process tree.
# A server whose check fails (the files as served, over https) gets "n/a"
# and the reason on stderr.
#
# Usage: scripts/bench-tls.sh [--rounds N] [--duration D] [--idle N]
#                             [--slices N] [--slice S] [--cap PCT] [--quick]
#   --rounds N    rounds of the open rows (default 3; median over them)
#   --duration D  seconds per open cell (default 5)
#   --idle N      idle connections for the memory row (default 10000)
#   --slices N    passes of the saturated rows (default 15)
#   --slice S     seconds per slice (default 1)
#   --cap PCT     the saturated rows' cap, % of CPU 0 (default 10)
#   --quick       5 slices; 1 round of 2 s, 1,000 idle connections
# Output: target/bench-tls/slices-{full,resumed,1k}.csv, raw.csv,
# results.tsv (open rows), table.md (also printed).
# Env: HTTPLITE_HEAVY_LOCK=/path runs cargo under `flock` on that file.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS="" DURATION="" IDLE="" QUICK=0 SLICES="" SLICE=1 CAP=10 RCONNS=16
while [ $# -gt 0 ]; do
    case "$1" in
        --rounds) ROUNDS=$2; shift 2 ;;
        --duration) DURATION=$2; shift 2 ;;
        --idle) IDLE=$2; shift 2 ;;
        --slices) SLICES=$2; shift 2 ;;
        --slice) SLICE=$2; shift 2 ;;
        --cap) CAP=$2; shift 2 ;;
        --quick) QUICK=1; shift ;;
        -h|--help) sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "unknown argument $1" >&2; exit 2 ;;
    esac
done
if [ "$QUICK" = 1 ]; then : "${ROUNDS:=1}" "${DURATION:=2}" "${IDLE:=1000}" "${SLICES:=5}"; fi
: "${ROUNDS:=3}" "${DURATION:=5}" "${IDLE:=10000}" "${SLICES:=15}"
[[ "$ROUNDS" =~ ^[0-9]+$ ]] && [ "$ROUNDS" -ge 1 ] && [ "$ROUNDS" -le 50 ] ||
    { echo "--rounds must be 1..50" >&2; exit 2; }
[[ "$DURATION" =~ ^[0-9]+$ ]] || { echo "--duration: seconds, e.g. 5" >&2; exit 2; }
[[ "$IDLE" =~ ^[0-9]+$ ]] && [ "$IDLE" -le 10000 ] || { echo "--idle: at most 10000" >&2; exit 2; }
[[ "$SLICES" =~ ^[0-9]+$ ]] && [ "$SLICES" -ge 2 ] && [ "$SLICES" -le 100 ] ||
    { echo "--slices must be 2..100" >&2; exit 2; }
[[ "$SLICE" =~ ^[0-9]+$ ]] && [ "$SLICE" -ge 1 ] && [ "$SLICE" -le 30 ] ||
    { echo "--slice: whole seconds, 1..30" >&2; exit 2; }
[[ "$CAP" =~ ^[0-9]+$ ]] && [ "$CAP" -ge 5 ] && [ "$CAP" -le 100 ] || { echo "--cap: 5..100" >&2; exit 2; }

source scripts/lib/proc-cpu.sh
export PATH="$PATH:/usr/sbin:/sbin"
log() { echo "bench-tls: $*" >&2; }
TMP=$(mktemp -d)
OUT=target/bench-tls
mkdir -p "$OUT"

source scripts/lib/servers.sh
source scripts/lib/cpu-cap.sh
[ "$(cap_mode)" != none ] || { echo "bench-tls.sh: needs a cgroup cpu controller (scripts/lib/cpu-cap.sh)" >&2; exit 1; }
cleanup() {
    stop_running
    cap_remove_all
    rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

SUDO=""
[ "$(id -u)" != 0 ] && SUDO=sudo
need() { # command package
    command -v "$1" >/dev/null && return 0
    log "installing $2"
    $SUDO apt-get update -qq >/dev/null 2>&1 || true
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "$2" >/dev/null 2>&1 || true
    command -v "$1" >/dev/null || { echo "cannot install $2 (for $1)" >&2; exit 1; }
}
need wrk wrk
need curl curl
need openssl openssl
need python3 python3
need gcc gcc
need nginx nginx-light
need h2o h2o
need lighttpd lighttpd
[ -e /usr/lib/lighttpd/mod_openssl.so ] || need_mod=1
[ "${need_mod:-0}" = 1 ] && { $SUDO apt-get install -y -qq lighttpd-mod-openssl >/dev/null 2>&1 || true; }

ulimit -n 20000 2>/dev/null || ulimit -n "$(ulimit -Hn)"
log "building httplite"
cargo_() { if [ -n "${HTTPLITE_HEAVY_LOCK:-}" ]; then flock "$HTTPLITE_HEAVY_LOCK" cargo "$@"; else cargo "$@"; fi; }
cargo_ build --release -p httplite -q
HTTPLITE=$PWD/target/release/httplite
NORESUME=$TMP/wrk_noresume.so
gcc -O2 -shared -fPIC -o "$NORESUME" scripts/lib/wrk_noresume.c -ldl

# --- files and the certificate --------------------------------------------------
ROOT=$TMP/www
mkdir -p "$ROOT"
head -c 1024 /dev/urandom > "$ROOT/1k.bin"
head -c 16777216 /dev/urandom > "$ROOT/16m.bin"
CERT=$TMP/cert.pem KEY=$TMP/key.pem
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
    -subj /CN=localhost -addext subjectAltName=DNS:localhost,IP:127.0.0.1 \
    -keyout "$KEY" -out "$CERT" 2>/dev/null
chmod 755 "$TMP" "$ROOT"; chmod 644 "$ROOT"/*.bin "$CERT" "$KEY"
SHA1K=$(sha256sum "$ROOT/1k.bin" | cut -d' ' -f1)
SHA16M=$(sha256sum "$ROOT/16m.bin" | cut -d' ' -f1)

SERVERS=(httplite nginx h2o lighttpd)
declare -A LABEL=([httplite]=httplite [nginx]=nginx [h2o]=H2O [lighttpd]=lighttpd)
declare -A NA=() PORT=() HPORT=()
low=$(awk '{print $1}' /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768)
next=$((10000 + RANDOM % (low - 10200)))
port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
pick() { for _ in $(seq 1 100); do next=$((next + 1)); port_free "$next" && break; done; echo "$next"; }
for s in "${SERVERS[@]}"; do PORT[$s]=$(pick); next=${PORT[$s]}; HPORT[$s]=$(pick); next=${HPORT[$s]}; done

# --- configs: TLS on PORT, cleartext on HPORT ------------------------------------
for s in nginx h2o lighttpd; do mkdir -p "$TMP/$s"; chmod 755 "$TMP/$s"; done
cat > "$TMP/nginx/nginx.conf" <<CONF
daemon off;
worker_processes 1;
pid $TMP/nginx/nginx.pid;
error_log $TMP/nginx/error.log warn;
events { worker_connections 20000; }
worker_rlimit_nofile 20000;
http {
    access_log off;
    keepalive_requests 100000000;
    keepalive_timeout 600s;
    sendfile on;
    client_body_temp_path $TMP/nginx/body;
    proxy_temp_path $TMP/nginx/proxy;
    fastcgi_temp_path $TMP/nginx/fastcgi;
    uwsgi_temp_path $TMP/nginx/uwsgi;
    scgi_temp_path $TMP/nginx/scgi;
    ssl_certificate $CERT;
    ssl_certificate_key $KEY;
    ssl_protocols TLSv1.2 TLSv1.3;
    ssl_session_cache shared:SSL:10m;
    ssl_session_tickets on;
    server {
        listen 127.0.0.1:${PORT[nginx]} ssl;
        listen 127.0.0.1:${HPORT[nginx]};
        root $ROOT;
        location / { default_type application/octet-stream; }
    }
}
CONF
cat > "$TMP/h2o/h2o.conf" <<CONF
num-threads: 1
max-connections: 20000
error-log: $TMP/h2o/error.log
listen:
  host: 127.0.0.1
  port: ${HPORT[h2o]}
listen:
  host: 127.0.0.1
  port: ${PORT[h2o]}
  ssl:
    certificate-file: $CERT
    key-file: $KEY
    minimum-version: TLSv1.2
hosts:
  default:
    paths:
      /:
        file.dir: $ROOT
CONF
cat > "$TMP/lighttpd/lighttpd.conf" <<CONF
server.modules += ("mod_openssl")
server.document-root = "$ROOT"
server.bind = "127.0.0.1"
server.port = ${HPORT[lighttpd]}
server.pid-file = "$TMP/lighttpd/lighttpd.pid"
server.errorlog = "$TMP/lighttpd/error.log"
server.max-worker = 0
server.max-fds = 20000
server.max-connections = 10000
server.max-keep-alive-requests = 65535
mimetype.assign = (".bin" => "application/octet-stream")
\$SERVER["socket"] == "127.0.0.1:${PORT[lighttpd]}" {
    ssl.engine = "enable"
    ssl.pemfile = "$CERT"
    ssl.privkey = "$KEY"
}
CONF

SPID="" CG=""
spawn() { # CMD...: in the background, inside cgroup $CG if set; $! is CMD's PID
    if [ -n "$CG" ]; then cap_spawn "$CG" "$@"; else "$@" & fi
}
start_server() { # server: starts it (TLS, or httplite-http: cleartext for httplite's http rows)
    local s=$1 log=$TMP/$1.log url
    case "$s" in
        httplite) spawn taskset -c 0 "$HTTPLITE" --bind "127.0.0.1:${PORT[$s]}" --workers 1 \
                      --root "$ROOT" --expose stats --quiet --tls-cert "$CERT" --tls-key "$KEY" \
                      > "$log" 2>&1 ;;
        httplite-http) spawn taskset -c 0 "$HTTPLITE" --bind "127.0.0.1:${HPORT[httplite]}" --workers 1 \
                      --root "$ROOT" --quiet > "$log" 2>&1 ;;
        nginx) spawn taskset -c 0 nginx -p "$TMP/nginx" -c "$TMP/nginx/nginx.conf" > "$log" 2>&1 ;;
        h2o) spawn taskset -c 0 h2o -c "$TMP/h2o/h2o.conf" > "$log" 2>&1 ;;
        lighttpd) spawn taskset -c 0 lighttpd -D -f "$TMP/lighttpd/lighttpd.conf" > "$log" 2>&1 ;;
    esac
    SPID=$!
    RUNNING+=("$SPID")
    if [ "$s" = httplite-http ]; then url="http://127.0.0.1:${HPORT[httplite]}/1k.bin"
    else url="https://127.0.0.1:${PORT[$s]}/1k.bin"; fi
    for _ in $(seq 1 100); do
        curl -s --cacert "$CERT" -o /dev/null "$url" && return 0
        kill -0 "$SPID" 2>/dev/null || break
        sleep 0.1
    done
    { echo "did not start:"; tail -3 "$log"; tail -3 "$TMP/$s/error.log" 2>/dev/null; } > "$TMP/why"
    stop_server
    return 1
}
stop_server() {
    stop_pids "$SPID"
    local keep=() p
    for p in "${RUNNING[@]}"; do [ "$p" != "$SPID" ] && keep+=("$p"); done
    RUNNING=("${keep[@]+"${keep[@]}"}")
}
verify() { # server: the files as served over https
    local base="https://127.0.0.1:${PORT[$1]}" got
    got=$(curl -sf --cacert "$CERT" --max-time 20 "$base/1k.bin" | sha256sum | cut -d' ' -f1)
    [ "$got" = "$SHA1K" ] || { echo "/1k.bin: wrong bytes" > "$TMP/why"; return 1; }
    got=$(curl -sf --cacert "$CERT" --max-time 20 "$base/16m.bin" | sha256sum | cut -d' ' -f1)
    [ "$got" = "$SHA16M" ] || { echo "/16m.bin: wrong bytes" > "$TMP/why"; return 1; }
}

cat > "$TMP/report.lua" <<'LUA'
done = function(summary, latency, requests)
    local e = summary.errors
    io.write(string.format("RESULT %d %d %d %d\n", summary.requests, summary.duration,
        summary.bytes, e.status + e.connect + e.read + e.write + e.timeout))
end
LUA

RESULTS=$OUT/results.tsv
printf 'round\tserver\tcell\tvalue\tunit\n' > "$RESULTS"
record() { printf '%s\t%s\t%s\t%s\t%s\n' "$@" >> "$RESULTS"; }
TICKS=$(getconf CLK_TCK)
us_per() { python3 -c "import sys; t,n,hz=map(float,sys.argv[1:]); print(round(t/hz*1e6/n,1) if n else 'invalid')" "$@"; }

wrk_run() { # round server row url conns -> records cpu/request and MB/s
    local round=$1 s=$2 row=$3 url=$4 conns=$5 before after r reqs dur bytes errs
    taskset -c 1 wrk -t1 -c"$conns" -d1s "$url" > /dev/null 2>&1 || true
    before=$(cpu_ticks_tree "$SPID")
    taskset -c 1 wrk -t1 -c"$conns" -d"${DURATION}s" --timeout 10s -s "$TMP/report.lua" "$url" \
        > "$TMP/wrk.out" 2>&1 || true
    after=$(cpu_ticks_tree "$SPID")
    r=$(sed -n 's/^RESULT //p' "$TMP/wrk.out")
    read -r reqs dur bytes errs <<<"${r:-0 1 0 0}"
    [ "$errs" != 0 ] && log "round $round ${LABEL[$s]} $row: $errs errors"
    record "$round" "$s" "$row-cpu" "$(us_per $((after - before)) "$reqs" "$TICKS")" us/req
    record "$round" "$s" "$row-mbs" "$(python3 -c "print(round($bytes/$dur, 1))")" MB/s
}
rss_tree() { local t=0 p k; for p in $(proc_tree "$SPID"); do
    k=$(awk '/^VmRSS:/ {print $2}' "/proc/$p/status" 2>/dev/null || echo 0); t=$((t + ${k:-0})); done
    echo $((t * 1024)); }
idle_row() { # round server
    local round=$1 s=$2 before after
    before=$(rss_tree)
    taskset -c 1 python3 - "${PORT[$s]}" "$IDLE" "$CERT" > "$TMP/idle.out" 2>&1 <<'PY' &
import asyncio, ssl, sys
port, n, ca = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
ctx = ssl.create_default_context(cafile=ca)
async def one(conns):
    r, w = await asyncio.open_connection("127.0.0.1", port, ssl=ctx, server_hostname="localhost")
    w.write(b"GET /1k.bin HTTP/1.1\r\nHost: localhost\r\n\r\n")
    await r.readuntil(b"\r\n\r\n"); await r.readexactly(1024)
    conns.append(w)
async def main():
    conns, sem = [], asyncio.Semaphore(200)
    async def guarded():
        async with sem: await one(conns)
    await asyncio.gather(*(guarded() for _ in range(n)))
    print("HELD", len(conns), flush=True)
    await asyncio.sleep(3600)
asyncio.run(main())
PY
    local cpid=$!
    for _ in $(seq 1 600); do grep -q '^HELD' "$TMP/idle.out" 2>/dev/null && break; sleep 0.1; done
    sleep 1
    after=$(rss_tree)
    local held; held=$(awk '/^HELD/ {print $2}' "$TMP/idle.out")
    kill "$cpid" 2>/dev/null || true; wait "$cpid" 2>/dev/null || true
    if [ "${held:-0}" != "$IDLE" ]; then log "round $round ${LABEL[$s]} idle: held ${held:-0} of $IDLE"
        record "$round" "$s" idle invalid B/conn; return; fi
    record "$round" "$s" idle "$(( (after - before) / IDLE ))" B/conn
}

# --- saturated rows: every server at once, capped, in interleaved slices ----------
declare -A SPIDS=()
STARTED=()
for s in "${SERVERS[@]}"; do
    CG=tls-$$-$s
    cap_create "$CG"
    cap_set "$CG" "$CAP"
    if ! start_server "$s"; then NA[$s]=$(tr '\n' ' ' < "$TMP/why"); log "${LABEL[$s]}: ${NA[$s]}"; continue; fi
    if ! verify "$s"; then NA[$s]="check failed: $(cat "$TMP/why")"; log "${LABEL[$s]}: ${NA[$s]}"; stop_server; continue; fi
    SPIDS[$s]=$SPID
    STARTED+=("$s")
done
CG=""
tls_counts() { # httplite's handshake counters: "full resumed"
    curl -s --cacert "$CERT" "https://127.0.0.1:${PORT[httplite]}/_httplite/stats" |
        python3 -c 'import json,sys; h=json.load(sys.stdin)["tls"]["handshakes"]; print(h["full"], h["resumed"])' ||
        echo "? ?"
}
# One slice of row $1 on server $2: prints "completed cpu_ns throttled_periods errors".
slice() {
    local row=$1 s=$2 cg=tls-$$-$2 url="https://127.0.0.1:${PORT[$2]}/1k.bin" before after t0 t1 r
    local pre=() args=(-d"${SLICE}s" --timeout 10s -s "$TMP/report.lua")
    case "$row" in
        full) pre=(env LD_PRELOAD="$NORESUME"); args+=(-t1 -c64 -H "Connection: close") ;;
        resumed) args+=(-t1 -c"$RCONNS" -H "Connection: close") ;;
        1k) args+=(-t1 -c64) ;;
    esac
    before=$(cap_usage_ns "$cg"); t0=$(cap_throttled "$cg")
    "${pre[@]}" taskset -c 1 wrk "${args[@]}" "$url" > "$TMP/slice.out" 2>&1 || true
    after=$(cap_usage_ns "$cg"); t1=$(cap_throttled "$cg")
    r=$(sed -n 's/^RESULT //p' "$TMP/slice.out")
    read -r reqs _ _ errs <<<"${r:-0 1 0 0}"
    echo "$reqs $((after - before)) $((t1 - t0)) $errs"
}
echo "row,slice,server,completed,cpu_ns,throttled,errors" > "$OUT/raw.csv"
for row in full resumed 1k; do
    counts0=$(tls_counts)
    for s in "${STARTED[@]}"; do slice "$row" "$s" > /dev/null; done # warm-up
    n=${#STARTED[@]}
    for k in $(seq 1 "$SLICES"); do
        for i in $(seq 0 $((n - 1))); do
            s=${STARTED[$(((i + k - 1) % n))]}
            read -r reqs ns thr errs < <(slice "$row" "$s")
            echo "$row,$k,$s,$reqs,$ns,$thr,$errs" >> "$OUT/raw.csv"
        done
    done
    # What the row's handshakes were, by httplite's own count (each slice
    # of the resumed row begins with $RCONNS full ones).
    if [ -n "${SPIDS[httplite]:-}" ]; then
        read -r f0 r0 <<<"$counts0"; read -r f1 r1 <<<"$(tls_counts)"
        if [[ "$f0$r0$f1$r1" =~ ^[0-9]+$ ]]; then
            log "$row: httplite handshakes during the row: $((f1 - f0)) full, $((r1 - r0)) resumed"
        else
            log "$row: httplite's handshake counters could not be read"
        fi
    fi
    log "$row: $SLICES slices done"
done
stop_running

python3 - "$OUT/raw.csv" "$CAP_PERIOD_US" "$SLICE" "$RCONNS" > "$TMP/saturated.md" <<'PY'
import csv, os, statistics, subprocess, sys
raw, period, slice_s, rconns = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
rows = list(csv.DictReader(open(raw)))
# Per-slice figures, written to slices-ROW.csv for scripts/lib/ratio_ci.py.
full_med = {}
for row in ("full", "resumed", "1k"):
    with open(raw.replace("raw.csv", f"slices-{row}.csv"), "w") as f:
        f.write("slice,server,value\n")
        per = {}
        for r in rows:
            if r["row"] != row:
                continue
            n, us = int(r["completed"]), int(r["cpu_ns"]) / 1000
            if row == "resumed" and r["server"] in full_med:
                # Leave out the slice's first rconns connections: full handshakes.
                n, us = n - rconns, us - rconns * full_med[r["server"]]
            if n > 0 and us > 0:
                per.setdefault(r["server"], []).append(us / n)
                f.write(f"{r['slice']},{r['server']},{us / n:.4f}\n")
        if row == "full":
            full_med = {s: statistics.median(v) for s, v in per.items()}
names = {"full": "full handshakes: server CPU µs/connection", "resumed": "resumed handshakes: server CPU µs/connection",
         "1k": "1 KiB keep-alive https: server CPU µs/request"}
servers = list(dict.fromkeys(r["server"] for r in rows))
out = ["| row | " + " | ".join(servers) + " | httplite / nginx | httplite / best peer |",
       "|---" * (len(servers) + 3) + "|"]
notes = []
for row in ("full", "resumed", "1k"):
    by, rate, unsat, errs = {}, {}, {}, {}
    for r in rows:
        if r["row"] != row:
            continue
        n, thr = int(r["completed"]), int(r["throttled"])
        s = r["server"]
        errs[s] = errs.get(s, 0) + int(r["errors"])
        if n > 0:
            rate.setdefault(s, []).append(n / slice_s)
        if thr * period / 1e6 / slice_s < 0.8:
            unsat[s] = unsat.get(s, 0) + 1
    for r in csv.DictReader(open(raw.replace("raw.csv", f"slices-{row}.csv"))):
        by.setdefault(r["server"], []).append(float(r["value"]))
    med = {s: statistics.median(v) for s, v in by.items()}
    peers = [s for s in med if s != "httplite"]
    best = min(peers, key=lambda s: med[s]) if peers else None
    def ci(b):
        if "httplite" not in med or b not in med:
            return "n/a"
        got = subprocess.run([sys.executable, os.path.join("scripts", "lib", "ratio_ci.py"), "httplite", b],
                             input=open(raw.replace("raw.csv", f"slices-{row}.csv")).read(),
                             capture_output=True, text=True).stdout.split()
        return f"{got[1]} {got[2]} {got[3]}" if len(got) >= 4 and got[1] != "n/a" else "n/a"
    cells = []
    for s in servers:
        if s not in med:
            cells.append("n/a")
            continue
        c = f"{med[s]:.1f} ({statistics.median(rate[s]):,.0f}/s)"
        if unsat.get(s):
            c += f" ! {unsat[s]} unsaturated"
        cells.append(c)
    out.append(f"| {names[row]} | " + " | ".join(cells) + f" | {ci('nginx')} | "
               + (f"{ci(best)} ({best})" if best else "n/a") + " |")
    for s, e in errs.items():
        if e and row != "full":
            notes.append(f"{row}: {s}: {e} errors")
print("\n".join(out))
for n in notes:
    print(n)
PY

for round in $(seq 1 "$ROUNDS"); do
    n=${#SERVERS[@]}
    for i in $(seq 0 $((n - 1))); do
        s=${SERVERS[$(((i + round - 1) % n))]}
        [ -n "${NA[$s]:-}" ] && continue
        log "round $round/$ROUNDS: ${LABEL[$s]}"
        if ! start_server "$s"; then NA[$s]=$(tr '\n' ' ' < "$TMP/why"); log "${LABEL[$s]}: ${NA[$s]}"; continue; fi
        if ! verify "$s"; then NA[$s]="check failed: $(cat "$TMP/why")"; log "${LABEL[$s]}: ${NA[$s]}"; stop_server; continue; fi
        wrk_run "$round" "$s" 16m "https://127.0.0.1:${PORT[$s]}/16m.bin" 8
        idle_row "$round" "$s"
        if [ "$s" != httplite ]; then
            wrk_run "$round" "$s" http-1k "http://127.0.0.1:${HPORT[$s]}/1k.bin" 64
            wrk_run "$round" "$s" http-16m "http://127.0.0.1:${HPORT[$s]}/16m.bin" 8
        fi
        stop_server
        if [ "$s" = httplite ] && start_server httplite-http; then
            wrk_run "$round" "$s" http-1k "http://127.0.0.1:${HPORT[httplite]}/1k.bin" 64
            wrk_run "$round" "$s" http-16m "http://127.0.0.1:${HPORT[httplite]}/16m.bin" 8
            stop_server
        fi
    done
done

python3 - "$RESULTS" "${SERVERS[@]}" > "$TMP/open.md" <<'PY'
import csv, statistics, sys
path, servers = sys.argv[1], sys.argv[2:]
cells = {}
for r in csv.DictReader(open(path), delimiter="\t"):
    try: v = float(r["value"])
    except ValueError: continue
    cells.setdefault((r["server"], r["cell"]), []).append(v)
def med(s, c):
    v = cells.get((s, c)); return statistics.median(v) if v else None
rows = [("1 KiB keep-alive http, uncapped: server CPU µs/request", "http-1k-cpu", None, min),
        ("16 MiB https: MB/s (http)", "16m-mbs", "http-16m-mbs", max),
        ("bytes per idle keep-alive TLS connection", "idle", None, min)]
print("| row | " + " | ".join(servers) + " | httplite / best peer |")
print("|---" * (len(servers) + 2) + "|")
for name, main, side, best in rows:
    out = []
    for s in servers:
        m, x = med(s, main), (med(s, side) if side else None)
        cell = "n/a" if m is None else f"{m:g}"
        if x is not None: cell += f" ({x:g})"
        out.append(cell)
    peers = [med(s, main) for s in servers[1:] if med(s, main) is not None]
    me = med(servers[0], main)
    ratio = f"{me / best(peers):.2f}" if me and peers and best(peers) else "n/a"
    print(f"| {name} | " + " | ".join(out) + f" | {ratio} |")
PY
{
    echo "# $(date -u +%Y-%m-%d) $(uname -r) $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
    echo "# Saturated: $SLICES slices of ${SLICE}s per server, each capped at $CAP % of CPU 0;"
    echo "# median server CPU (median completed per second), and ratios: median [95 % CI] over per-pass ratios"
    cat "$TMP/saturated.md"
    echo
    echo "# Open rows: one server at a time, uncapped, median over $ROUNDS round(s) of ${DURATION}s"
    cat "$TMP/open.md"
} > "$OUT/table.md"
cat "$OUT/table.md"
for s in "${SERVERS[@]}"; do [ -n "${NA[$s]:-}" ] && echo "${LABEL[$s]}: n/a: ${NA[$s]}"; done
exit 0
