#!/usr/bin/env bash
# Static files: httplite against nginx (with and without open_file_cache),
# H2O and lighttpd, in one run, each row with its goal.
#
# Every server gets one worker (one thread), no access log, the same root (a
# temp dir with a 1 KiB, a 64 KiB and a 16 MiB file of random bytes, read
# back from the disk before the servers start; see --fresh-files) and a
# 127.0.0.1 port of its own; the server runs on CPU 0 (taskset -c 0) and
# `wrk -t1` on CPU 1. Each server runs in a cgroup of its own
# (scripts/lib/cpu-cap.sh), which counts the CPU of all its threads and
# processes (nginx: master + worker). For the CPU cells (1 KiB, 64 KiB, 404,
# 304) the cgroup caps the server at --cap % of one core (default 50), so that
# every server is saturated and has a batch waiting at every wake: CPU per
# request is then the cost of a request at full load, not a measure of how
# often an underloaded server sleeps (docs/benchmarks.md). The 16 MiB cell runs
# uncapped (it measures throughput). CPU is read from the cgroup after a 1 s
# warm-up and after the run, and divided by the requests (or the
# megabytes) wrk completed. Cells (rows):
#   1 KiB file, 256 connections: server CPU µs/request (requests/s)
#   64 KiB file, 256 connections: the same
#   16 MiB file, 8 connections: throughput MB/s, 10^6 bytes (server CPU µs/MB),
#       measured in slices (below), with one more column: httplite with
#       `--sendfile-max 512KiB` (its copy path; the default is sendfile)
#   404 (a missing path), 256 connections: server CPU µs/request (requests/s)
#   304 (If-None-Match with the file's ETag, taken from the server's first
#       response to a GET of the 1 KiB file), 256 connections: the same
# Before measuring, every server is checked: the sha256 of each file as
# served equals the original's, the missing path answers 404, the ETag answers
# 304; and every run is checked from wrk's own counts (no non-2xx/3xx status
# except in the 404 row, where all are; bytes per response at least the file's
# size; under 1 KiB per 304). A server that fails a check or does not start
# gets "n/a" in its column and the reason on stderr; a cell that fails gets
# "invalid".
#
# Peers are Debian's packages nginx-light, h2o and lighttpd; what is missing
# is installed with apt-get (as root, or with sudo). Their configs are written
# to the temp dir:
#   nginx:   scripts/lib/nginx-conf.sh's config (as scripts/bench.sh uses) with
#            `sendfile on; tcp_nopush on;`, once without and once with
#            `open_file_cache max=10000 inactive=60s; open_file_cache_valid 60s;
#            open_file_cache_errors on;`
#   H2O:     num-threads 1, file.dir, otherwise defaults (no pid-file: as root
#            it drops to nobody before writing one)
#   lighttpd: server.max-worker 0 (one process), otherwise defaults except
#            server.max-keep-alive-requests 65535 (its default of 1,000 closes
#            the connection every 1,000 requests; nginx's cap is raised too,
#            H2O and httplite have none) and a mimetype.assign for .bin
#            (without a type for the file it sends no ETag, so no 304)
# (On a machine whose apt starts services, installing a peer also starts its
# distribution service on port 80; this script only uses its own ports.)
#
# Order: every server is started once and stays up; each round measures each
# cell on every server in turn (the first server rotates each round), so a
# server's rounds are interleaved with its peers'; the table shows medians
# over the rounds. The 16 MiB cell runs in slices instead: after one warm-up
# slice each, --slices rounds of one --slice (default 2 s) of wrk on every
# server in turn (A, B, C, ..., then again), a slice's figures being the
# bytes wrk received and the cgroup's CPU in it. httplite's ratios to the
# best peer (throughput: the highest median MB/s; CPU: the lowest median
# µs/MB) are formed slice by slice from neighbouring slices, so that a slow
# spell of the host lands on both sides, and bootstrapped into a 95 %
# interval (scripts/lib/ratio_ci.py). Raw runs:
# target/bench-static/results.tsv (a slice's round is s1, s2, ...); the
# table and the ratios are also written to target/bench-static/table.md.
#
# --netns runs the 16 MiB slices over a network path instead of loopback:
# two network namespaces joined by a veth pair (10.203.0.1 for the servers,
# 10.203.0.2 for wrk and curl; MTU 1500, the veth's default), created for
# the run and deleted on exit, so that no traffic leaves them. Servers:
# httplite (sendfile), httplite `--sendfile-max 512KiB`, nginx, lighttpd.
# Output then goes to target/bench-static-netns/.
#
# Usage: scripts/bench-static.sh [--rounds N] [--duration D] [--cap PCT]
#                                [--slices N] [--slice S] [--cells LIST]
#                                [--netns] [--quick]
#   --rounds N     rounds (default 3; median over them)
#   --cap PCT      CPU cap of the server in the CPU cells, % of one core
#                  (default 50; 0 = uncapped, the server's CPU as wrk leaves it)
#   --duration D   wrk duration per cell (default 5s)
#   --slices N     slices of the 16 MiB cell per server (default 10)
#   --slice S      seconds per slice (default 2)
#   --cells LIST   only these cells, e.g. 16m or 1k,64k (default all:
#                  1k,64k,16m,404,304)
#   --netns        the 16 MiB cell over a veth pair between two network
#                  namespaces (needs root and `ip`)
#   --quick        a fast check: 1 round of 2 s, 4 slices (explicit
#                  --rounds/--duration/--slices win)
#   --fresh-files  serve the files from the page cache as their writes left
#                  it, instead of dropping them and reading them back (below)
# Env: HTTPLITE_HEAVY_LOCK=/path runs cargo under `flock` on that file.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS="" DURATION="" QUICK=0 CAP=50 SLICES="" SLICE=2 CELL_LIST="1k,64k,16m,404,304" NETNS=0 FRESH=0
while [ $# -gt 0 ]; do
    case "$1" in
        --rounds) ROUNDS=$2; shift 2 ;;
        --duration) DURATION=$2; shift 2 ;;
        --cap) CAP=$2; shift 2 ;;
        --slices) SLICES=$2; shift 2 ;;
        --slice) SLICE=$2; shift 2 ;;
        --cells) CELL_LIST=$2; shift 2 ;;
        --netns) NETNS=1; CELL_LIST=16m; shift ;;
        --quick) QUICK=1; shift ;;
        --fresh-files) FRESH=1; shift ;;
        -h|--help) sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "unknown argument $1" >&2; exit 2 ;;
    esac
done
if [ "$QUICK" = 1 ]; then : "${ROUNDS:=1}" "${DURATION:=2s}" "${SLICES:=4}"; fi
: "${ROUNDS:=3}" "${DURATION:=5s}" "${SLICES:=10}"
[[ "$SLICES" =~ ^[0-9]+$ ]] && [ "$SLICES" -ge 2 ] && [ "$SLICES" -le 100 ] ||
    { echo "--slices must be 2..100" >&2; exit 2; }
[[ "$SLICE" =~ ^[0-9]+$ ]] && [ "$SLICE" -ge 1 ] && [ "$SLICE" -le 30 ] ||
    { echo "--slice: whole seconds, 1..30" >&2; exit 2; }
for c in ${CELL_LIST//,/ }; do
    case "$c" in 1k|64k|16m|404|304) ;; *) echo "--cells: unknown cell $c" >&2; exit 2 ;; esac
done
[[ "$ROUNDS" =~ ^[0-9]+$ ]] && [ "$ROUNDS" -ge 1 ] && [ "$ROUNDS" -le 50 ] ||
    { echo "--rounds must be 1..50" >&2; exit 2; }
[[ "$CAP" =~ ^[0-9]+$ ]] && [ "$CAP" -le 100 ] || { echo "--cap must be 0..100" >&2; exit 2; }
[[ "$DURATION" =~ ^[0-9]+(s|m)?$ ]] || { echo "--duration: e.g. 5s" >&2; exit 2; }

source scripts/lib/proc-cpu.sh
source scripts/lib/cpu-cap.sh
export PATH="$PATH:/usr/sbin:/sbin"
log() { echo "bench-static: $*" >&2; }

TMP=$(mktemp -d)
OUT=target/bench-static
[ "$NETNS" = 1 ] && OUT=target/bench-static-netns
mkdir -p "$OUT"

# Where the servers listen, and how a command runs on the server's side
# (SEXEC) and the client's (CEXEC): plain loopback, or inside the two
# namespaces of --netns (`ip netns exec` execs its command, so a server's
# PID stays the one started).
SADDR=127.0.0.1
SEXEC=(env) CEXEC=(env)
NSS="" NSC=""

source scripts/lib/servers.sh
cleanup() {
    stop_running
    cap_remove_all
    # Deleting a namespace deletes its end of the veth pair, and with it the pair.
    [ -n "$NSS" ] && ip netns del "$NSS" 2>/dev/null
    [ -n "$NSC" ] && ip netns del "$NSC" 2>/dev/null
    rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# --- tools and peers ---------------------------------------------------------
SUDO=""
if [ "$(id -u)" != 0 ]; then
    if command -v sudo >/dev/null; then SUDO=sudo; else SUDO=none; fi
fi
APT_UPDATED=0
install_pkg() { # package -> 0 if installed; the log is in $TMP/apt-PKG.log
    [ "$SUDO" = none ] && { echo "not root and no sudo" > "$TMP/apt-$1.log"; return 1; }
    if [ "$APT_UPDATED" = 0 ]; then
        $SUDO apt-get update -qq > "$TMP/apt-update.log" 2>&1 || true
        APT_UPDATED=1
    fi
    log "installing $1"
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "$1" > "$TMP/apt-$1.log" 2>&1
}
need() { # command package: required tools
    command -v "$1" >/dev/null && return 0
    install_pkg "$2" && command -v "$1" >/dev/null && return 0
    echo "cannot install $2 (for $1):" >&2; tail -5 "$TMP/apt-$2.log" >&2; exit 1
}
need wrk wrk
need curl curl
need taskset util-linux
need python3 python3
need sha256sum coreutils
[ "$NETNS" = 1 ] && need ip iproute2
[ "$(cap_mode)" != none ] || { echo "bench-static: needs a cgroup cpu controller (see scripts/lib/cpu-cap.sh)" >&2; exit 1; }

SERVERS=(httplite httplite-copy nginx nginx-ofc h2o lighttpd)
[ "$NETNS" = 1 ] && SERVERS=(httplite httplite-copy nginx lighttpd)
declare -A LABEL=([httplite]=httplite [httplite-copy]="httplite --sendfile-max 512KiB"
    [nginx]=nginx [nginx-ofc]="nginx + open_file_cache" [h2o]=H2O [lighttpd]=lighttpd)
declare -A NA=()   # server -> why it has no column
peer() { # server command package
    command -v "$2" >/dev/null && return 0
    if install_pkg "$3" && command -v "$2" >/dev/null; then return 0; fi
    NA[$1]="apt-get install $3 failed: $(tail -3 "$TMP/apt-$3.log" | tr '\n' ' ')"
    log "${LABEL[$1]}: ${NA[$1]}"
}
peer nginx nginx nginx-light
[ -n "${NA[nginx]:-}" ] && NA[nginx-ofc]=${NA[nginx]}
[ "$NETNS" = 0 ] && peer h2o h2o h2o
peer lighttpd lighttpd lighttpd

if [ "$NETNS" = 1 ]; then
    [ "$(id -u)" = 0 ] || { echo "bench-static: --netns needs root" >&2; exit 1; }
    NSS=hl-bench-$$-s NSC=hl-bench-$$-c
    ip netns add "$NSS"
    ip netns add "$NSC"
    ip link add "hlb$$s" type veth peer name "hlb$$c"
    ip link set "hlb$$s" netns "$NSS"
    ip link set "hlb$$c" netns "$NSC"
    ip -n "$NSS" addr add 10.203.0.1/24 dev "hlb$$s"
    ip -n "$NSC" addr add 10.203.0.2/24 dev "hlb$$c"
    for ns in "$NSS" "$NSC"; do ip -n "$ns" link set lo up; done
    ip -n "$NSS" link set "hlb$$s" up
    ip -n "$NSC" link set "hlb$$c" up
    SADDR=10.203.0.1
    SEXEC=(ip netns exec "$NSS") CEXEC=(ip netns exec "$NSC")
    for _ in $(seq 1 50); do
        "${CEXEC[@]}" ping -c1 -W1 "$SADDR" > /dev/null 2>&1 && break
        sleep 0.1
    done
    log "network namespaces $NSS ($SADDR) and $NSC (10.203.0.2), veth MTU $(ip -n "$NSS" -o link show "hlb$$s" | sed -n 's/.* mtu \([0-9]*\).*/\1/p')"
fi

ulimit -n 20000 2>/dev/null || ulimit -n "$(ulimit -Hn)"

log "building httplite"
cargo_() { if [ -n "${HTTPLITE_HEAVY_LOCK:-}" ]; then flock "$HTTPLITE_HEAVY_LOCK" cargo "$@"; else cargo "$@"; fi; }
cargo_ build --release -p httplite -q
HTTPLITE=$PWD/target/release/httplite

# --- the files ---------------------------------------------------------------
ROOT=$TMP/www
mkdir -p "$ROOT"
head -c 1024 /dev/urandom > "$ROOT/1k.bin"
head -c 65536 /dev/urandom > "$ROOT/64k.bin"
head -c 16777216 /dev/urandom > "$ROOT/16m.bin"
# A deployed site's files were written long before and come into the page
# cache from the disk, through readahead, in large folios; a file written a
# moment ago stays cached in the small folios its writes made, and a
# loopback client copies `sendfile`d bytes out of those more slowly
# (docs/static-files.md). So, unless --fresh-files, the files are flushed,
# dropped from the page cache and read back once before any server starts.
if [ "$FRESH" = 0 ]; then
    python3 - "$ROOT"/*.bin <<'PY'
import os, sys
for path in sys.argv[1:]:
    fd = os.open(path, os.O_RDONLY)
    os.fsync(fd)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    os.close(fd)
PY
    cat "$ROOT"/*.bin > /dev/null
fi
# nginx's worker and H2O drop to nobody when started as root.
chmod 755 "$TMP" "$ROOT"; chmod 644 "$ROOT"/*.bin
declare -A SHA=() SIZE=()
for f in 1k 64k 16m; do
    SHA[$f]=$(sha256sum "$ROOT/$f.bin" | cut -d' ' -f1)
    SIZE[$f]=$(stat -c %s "$ROOT/$f.bin")
done
MISSING=/missing-file.bin

cat > "$TMP/report.lua" <<'LUA'
-- only done(): no per-response callback, so wrk's own speed is unchanged
done = function(summary, latency, requests)
    local e = summary.errors
    io.write(string.format("RESULT %d %d %d %d %d %d %d %d\n", summary.requests,
        summary.duration, summary.bytes, e.status, e.connect, e.read, e.write, e.timeout))
end
LUA

# --- ports: one per server, free when chosen -----------------------------------
declare -A PORT=()
port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
# Below the kernel's ephemeral range: wrk's own connections take local ports
# from that range, and one of them on a server's port made that server fail
# to bind when it was restarted for the next round (seen with nginx).
low=$(awk '{print $1}' /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768)
next=$((10000 + RANDOM % (low - 10100)))
# Every server gets one, run or not: write_configs writes every config.
for s in httplite httplite-copy nginx nginx-ofc h2o lighttpd; do
    for _ in $(seq 1 100); do
        next=$((next + 1)); [ "$next" -ge "$low" ] && next=10001
        port_free "$next" && break
    done
    PORT[$s]=$next
done

# --- configs -------------------------------------------------------------------
write_configs() {
    local s d
    for s in nginx nginx-ofc h2o lighttpd; do mkdir -p "$TMP/$s"; chmod 755 "$TMP/$s"; done
    local sf="sendfile on; tcp_nopush on;"
    local ofc="open_file_cache max=10000 inactive=60s; open_file_cache_valid 60s; open_file_cache_errors on;"
    scripts/lib/nginx-conf.sh "$TMP/nginx" "${PORT[nginx]}" "$ROOT" "$sf" |
        sed "s/listen 127.0.0.1:/listen $SADDR:/" > "$TMP/nginx/nginx.conf"
    scripts/lib/nginx-conf.sh "$TMP/nginx-ofc" "${PORT[nginx-ofc]}" "$ROOT" "$sf $ofc" |
        sed "s/listen 127.0.0.1:/listen $SADDR:/" > "$TMP/nginx-ofc/nginx.conf"
    d=$TMP/h2o
    cat > "$d/h2o.conf" <<CONF
listen:
  host: $SADDR
  port: ${PORT[h2o]}
num-threads: 1
max-connections: 20000
error-log: $d/error.log
hosts:
  default:
    paths:
      /:
        file.dir: $ROOT
CONF
    d=$TMP/lighttpd
    cat > "$d/lighttpd.conf" <<CONF
server.document-root = "$ROOT"
server.bind = "$SADDR"
server.port = ${PORT[lighttpd]}
server.pid-file = "$d/lighttpd.pid"
server.errorlog = "$d/error.log"
server.max-worker = 0
server.max-fds = 20000
server.max-connections = 10000
server.max-keep-alive-requests = 65535
# without a type for the file, lighttpd 1.4.69 sends neither ETag nor Last-Modified
mimetype.assign = (".bin" => "application/octet-stream")
CONF
}
write_configs

ccurl() { "${CEXEC[@]}" curl "$@"; }   # curl on the client's side
SPID=""   # the started server's PID (nginx: the master)
CG=""     # its cgroup
declare -A SPIDS=() CGS=()   # every running server's PID and cgroup
start_server() { # server -> SPID, or 1 with the reason in $TMP/why
    local s=$1 log=$TMP/$1.log
    mkdir -p "$TMP/$s"
    CG=bench-static-$$-$s
    CGS[$s]=$CG
    cap_create "$CG"
    case "$s" in
        httplite) cap_spawn "$CG" "${SEXEC[@]}" taskset -c 0 "$HTTPLITE" --bind "$SADDR:${PORT[$s]}" \
                      --workers 1 --root "$ROOT" --quiet > "$log" 2>&1 ;;
        httplite-copy) cap_spawn "$CG" "${SEXEC[@]}" taskset -c 0 "$HTTPLITE" --bind "$SADDR:${PORT[$s]}" \
                      --workers 1 --root "$ROOT" --quiet --sendfile-max 512KiB > "$log" 2>&1 ;;
        nginx|nginx-ofc) cap_spawn "$CG" "${SEXEC[@]}" taskset -c 0 nginx -p "$TMP/$s" \
                      -c "$TMP/$s/nginx.conf" > "$log" 2>&1 ;;
        h2o) cap_spawn "$CG" "${SEXEC[@]}" taskset -c 0 h2o -c "$TMP/h2o/h2o.conf" > "$log" 2>&1 ;;
        lighttpd) cap_spawn "$CG" "${SEXEC[@]}" taskset -c 0 lighttpd -D -f "$TMP/lighttpd/lighttpd.conf" \
                      > "$log" 2>&1 ;;
    esac
    SPID=$!
    SPIDS[$s]=$SPID
    RUNNING+=("$SPID")
    for _ in $(seq 1 100); do
        ccurl -s -o /dev/null "http://$SADDR:${PORT[$s]}/1k.bin" && return 0
        kill -0 "$SPID" 2>/dev/null || break
        sleep 0.1
    done
    { echo "did not start:"; tail -5 "$log"; tail -5 "$TMP/$s/error.log" 2>/dev/null; } > "$TMP/why"
    stop_server
    return 1
}
stop_server() {
    stop_pids "$SPID"
    cap_remove "$CG"
    local keep=() p
    for p in "${RUNNING[@]}"; do [ "$p" != "$SPID" ] && keep+=("$p"); done
    RUNNING=("${keep[@]+"${keep[@]}"}")
}

declare -A ETAG=()
verify() { # server -> 0, or 1 with the reason in $TMP/why; sets ETAG[server]
    local s=$1 base="http://$SADDR:${PORT[$1]}" f got code etag
    for f in 1k 64k 16m; do
        got=$(ccurl -sf --max-time 20 "$base/$f.bin" | sha256sum | cut -d' ' -f1)
        [ "$got" = "${SHA[$f]}" ] || { echo "/$f.bin: sha256 $got, not ${SHA[$f]}" > "$TMP/why"; return 1; }
    done
    code=$(ccurl -s --max-time 5 -o /dev/null -w '%{http_code}' "$base$MISSING")
    [ "$code" = 404 ] || { echo "$MISSING: status $code, not 404" > "$TMP/why"; return 1; }
    etag=$(ccurl -s --max-time 5 -D - -o /dev/null "$base/1k.bin" |
        tr -d '\r' | sed -n 's/^[Ee][Tt][Aa][Gg]: *//p' | head -1)
    [ -n "$etag" ] || { echo "/1k.bin: no ETag" > "$TMP/why"; return 1; }
    code=$(ccurl -s --max-time 5 -o /dev/null -w '%{http_code}' -H "If-None-Match: $etag" "$base/1k.bin")
    [ "$code" = 304 ] || { echo "If-None-Match: $etag: status $code, not 304" > "$TMP/why"; return 1; }
    ETAG[$s]=$etag
}

# Cells: name|path|connections|expect
CELL16="16m|/16m.bin|8|200"
CELLS=()   # the cells measured in rounds; the 16 MiB cell runs in slices
for c in "1k|/1k.bin|256|200" "64k|/64k.bin|256|200" "404|$MISSING|256|404" "304|/1k.bin|256|304"; do
    [[ ",$CELL_LIST," == *",${c%%|*},"* ]] && CELLS+=("$c")
done
RESULTS=$OUT/results.tsv
printf 'round\tserver\tcell\trequests\tduration_us\tbytes\tstatus_errors\tsocket_errors\tcpu_ns\tcap_pct\tthrottled_periods\tcheck\n' > "$RESULTS"

run_cell() { # round server cell-line [slice seconds: no warm-up, that long]
    local round=$1 s=$2 name path conns expect url before after r cap t0 t1 CG=${CGS[$2]}
    local duration=${4:+${4}s}
    IFS='|' read -r name path conns expect <<<"$3"
    url="http://$SADDR:${PORT[$s]}$path"
    local args=(-t1 -c"$conns" --timeout 10s -s "$TMP/report.lua")
    [ "$expect" = 304 ] && args+=(-H "If-None-Match: ${ETAG[$s]}")
    cap=$CAP
    [ "$name" = 16m ] && cap=0
    cap_set "$CG" "$cap"
    [ -z "$duration" ] &&
        { "${CEXEC[@]}" taskset -c 1 wrk "${args[@]}" -d1s "$url" > /dev/null 2>&1 || true; }   # warm-up
    before=$(cap_usage_ns "$CG"); t0=$(cap_throttled "$CG")
    "${CEXEC[@]}" taskset -c 1 wrk "${args[@]}" -d"${duration:-$DURATION}" "$url" > "$TMP/wrk.out" 2>&1 || true
    after=$(cap_usage_ns "$CG"); t1=$(cap_throttled "$CG")
    r=$(sed -n 's/^RESULT //p' "$TMP/wrk.out")
    local reqs=0 dur=0 bytes=0 st=0 ec=0 er=0 ew=0 et=0 check=ok
    [ -n "$r" ] && read -r reqs dur bytes st ec er ew et <<<"$r"
    if [ -z "$r" ] || [ "$reqs" = 0 ]; then check="no responses: $(tail -2 "$TMP/wrk.out" | tr '\n' ' ')"
    elif [ "$expect" = 404 ] && [ "$st" != "$reqs" ]; then check="$((reqs - st)) of $reqs not 404"
    elif [ "$expect" != 404 ] && [ "$st" != 0 ]; then check="$st responses with status >= 400"
    elif [ "$expect" = 200 ] && [ $((bytes / reqs)) -lt "${SIZE[$name]}" ]; then
        check="$((bytes / reqs)) bytes per response, less than the file"
    elif [ "$expect" = 304 ] && [ $((bytes / reqs)) -ge 1024 ]; then
        check="$((bytes / reqs)) bytes per response: not 304s"
    elif [ "$cap" -gt 0 ] && [ $(( (t1 - t0) * CAP_PERIOD_US * 10 )) -lt $(( dur * 8 )) ]; then
        # Throttled in under 80 % of the run's periods: the cap did not bind,
        # so this CPU figure is not a saturated one.
        check="not saturated: throttled in $((t1 - t0)) periods of $((dur / CAP_PERIOD_US))"
    fi
    [ "$check" != ok ] && log "round $round ${LABEL[$s]} $name: $check"
    [ $((ec + er + ew + et)) -gt 0 ] &&
        log "round $round ${LABEL[$s]} $name: socket errors connect $ec read $er write $ew timeout $et"
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$round" "$s" "$name" "$reqs" "$dur" \
        "$bytes" "$st" "$((ec + er + ew + et))" "$((after - before))" "$cap" "$((t1 - t0))" "$check" >> "$RESULTS"
}

# Every server is started (and checked) once and stays up, idle on CPU 0
# while another is measured; then each cell is measured on every server in
# turn, the order rotating each round. Interleaved like this, a server's
# rounds are minutes apart and every server meets the host's slow spells
# alike: this machine's speed drifts by up to 20 % for seconds at a time
# (docs/benchmarks.md), which per-server blocks turned into 4-47 % spreads.
for s in "${SERVERS[@]}"; do
    [ -n "${NA[$s]:-}" ] && continue
    log "${LABEL[$s]} on $SADDR:${PORT[$s]}"
    if ! start_server "$s"; then
        NA[$s]=$(tr '\n' ' ' < "$TMP/why"); log "${LABEL[$s]}: ${NA[$s]}"; continue
    fi
    if ! verify "$s"; then
        NA[$s]="check failed: $(cat "$TMP/why")"; log "${LABEL[$s]}: ${NA[$s]}"
        stop_server
    fi
done
UP=() UP_ROUNDS=()   # every server up; those in the rounds (not the copy variant)
for s in "${SERVERS[@]}"; do
    [ -n "${NA[$s]:-}" ] && continue
    UP+=("$s")
    [ "$s" != httplite-copy ] && UP_ROUNDS+=("$s")
done
if [ ${#CELLS[@]} -gt 0 ]; then
    for round in $(seq 1 "$ROUNDS"); do
        log "round $round/$ROUNDS"
        n=${#UP_ROUNDS[@]}
        for c in "${CELLS[@]}"; do
            for i in $(seq 0 $((n - 1))); do
                run_cell "$round" "${UP_ROUNDS[$(((i + round - 1) % n))]}" "$c"
            done
        done
    done
fi
# The 16 MiB cell: one warm-up slice each (round s0, left out of the
# figures), then the slices, every server in turn.
if [[ ",$CELL_LIST," == *",16m,"* ]]; then
    log "16 MiB: $SLICES slices of ${SLICE}s per server"
    for k in $(seq 0 "$SLICES"); do
        for s in "${UP[@]}"; do run_cell "s$k" "$s" "$CELL16" "$SLICE"; done
        [ "$k" -gt 0 ] && log "slice $k/$SLICES done"
    done
fi
for s in "${UP[@]}"; do SPID=${SPIDS[$s]} CG=${CGS[$s]} stop_server; done

# --- the table -------------------------------------------------------------------
versions() {
    echo "httplite as of $(date -u +%F)"
    command -v nginx >/dev/null && nginx -v 2>&1 | sed 's/^nginx version: //'
    command -v h2o >/dev/null && h2o --version 2>/dev/null | head -1
    command -v lighttpd >/dev/null && lighttpd -v 2>/dev/null | head -1 | sed 's/ - .*//'
    wrk -v 2>&1 | head -1 | cut -d' ' -f1-2
}
NA_LIST=""
for s in "${SERVERS[@]}"; do [ -n "${NA[$s]:-}" ] && NA_LIST+="$s=${NA[$s]}"$'\n'; done
WHERE="loopback (127.0.0.1)"
[ "$NETNS" = 1 ] && WHERE="a veth pair between two network namespaces (server $SADDR)"
if [ "$FRESH" = 1 ]; then WHERE="$WHERE, files served as their writes left them in the page cache"
else WHERE="$WHERE, files read back into the page cache from the disk"; fi
python3 - "$RESULTS" "$ROUNDS" "$DURATION" "$(versions | paste -sd, | sed 's/,/, /g')" \
    "$NA_LIST" "$CAP" "$CELL_LIST" "$SLICES" "$SLICE" "$OUT" "${SERVERS[*]}" "$WHERE" \
    > "$OUT/table.md" <<'PY'
import csv, statistics, sys
from collections import defaultdict
path, rounds, duration, versions, na_list, cap, cell_list, nslices, slice_s, out, started, where = sys.argv[1:13]
servers = [s for s in ["httplite", "httplite-copy", "nginx", "nginx-ofc", "h2o", "lighttpd"]
           if s in started.split()]
label = {"httplite": "httplite", "httplite-copy": "httplite `--sendfile-max 512KiB`", "nginx": "nginx",
         "nginx-ofc": "nginx + `open_file_cache`", "h2o": "H2O", "lighttpd": "lighttpd"}
na = dict(l.split("=", 1) for l in na_list.splitlines() if "=" in l)
runs = defaultdict(list)
slices = defaultdict(dict)   # metric -> {(slice, server): value}
for r in csv.DictReader(open(path), delimiter="\t"):
    if r["check"] != "ok" or r["round"] == "s0":
        continue
    reqs, dur_s, nbytes = int(r["requests"]), int(r["duration_us"]) / 1e6, int(r["bytes"])
    cpu_us = int(r["cpu_ns"]) / 1e3
    x = {"cpu_req": cpu_us / reqs, "rps_core": reqs / (cpu_us / 1e6),
         "mbs": nbytes / 1e6 / dur_s, "cpu_mb": cpu_us / (nbytes / 1e6)}
    runs[(r["server"], r["cell"])].append(x)
    if r["round"].startswith("s"):
        for k in ("mbs", "cpu_mb"):
            slices[k][(int(r["round"][1:]), r["server"])] = x[k]
# The slices as scripts/lib/ratio_ci.py reads them, and the best peer of each metric.
for k in ("mbs", "cpu_mb"):
    with open(f"{out}/slices-{k}.csv", "w") as f:
        f.write(f"slice,server,{k}\n")
        for (n, s), v in sorted(slices[k].items()):
            f.write(f"{n},{s},{v:.4f}\n")
def best_peer(key, lower):
    m = [(statistics.median(x[key] for x in runs[(s, "16m")]), s) for s in servers
         if not s.startswith("httplite") and runs.get((s, "16m"))]
    return (min if lower else max)(m)[1] if m else "-"
with open(f"{out}/best16", "w") as f:
    f.write(f"{best_peer('mbs', False)} {best_peer('cpu_mb', True)}\n")
cells = [  # name, label, main metric, lower is better, goal ratio, secondary
    ("1k", "1 KiB, 256 connections: server CPU µs/request (requests/s per core)", "cpu_req", True, 0.9, "rps_core"),
    ("64k", "64 KiB, 256 connections: server CPU µs/request (requests/s per core)", "cpu_req", True, 0.95, "rps_core"),
    ("16m", "16 MiB, 8 connections: throughput MB/s (server CPU µs/MB)", "mbs", False, 0.95, "cpu_mb"),
    ("404", "404, 256 connections: server CPU µs/request (requests/s per core)", "cpu_req", True, 0.9, "rps_core"),
    ("304", "304 (If-None-Match), 256 connections: server CPU µs/request (requests/s per core)", "cpu_req", True, 0.9, "rps_core"),
]
cells = [c for c in cells if c[0] in cell_list.split(",")]
def med(s, c, k):
    v = [x[k] for x in runs.get((s, c), [])]
    return statistics.median(v) if v else None
def fmt(k, x):
    if k == "rps_core":
        return f"{x / 1000:,.0f}k" if x >= 10000 else f"{x:,.0f}"
    if k == "mbs":
        return f"{x:,.0f}"
    return f"{x:,.2f}"
capped = f"capped at {cap} % of one core by a cgroup" if cap != "0" else "uncapped"
how = []
if any(c[0] != "16m" for c in cells):
    how.append(f"medians of {rounds} round(s) of {duration} (servers {capped})")
if any(c[0] == "16m" for c in cells):
    how.append(f"the 16 MiB row medians of {nslices} interleaved slices of {slice_s} s (uncapped)")
print(f"Static files over {where}, {versions}; one worker each, server on CPU 0, `wrk -t1` on CPU 1; "
      f"{'; '.join(how)}; MB = 10^6 bytes.\n")
cols = [s for s in servers]
print("| file | " + " | ".join(label[s] for s in cols) + " | best peer | httplite / best peer | goal |")
print("|---" * (len(cols) + 4) + "|")
for name, text, key, lower, goal, sec in cells:
    row = [text]
    for s in cols:
        m = med(s, name, key)
        if s == "httplite-copy" and name != "16m":
            row.append("–")
        elif s in na:
            row.append("n/a")
        elif m is None:
            row.append("invalid")
        else:
            row.append(f"{fmt(key, m)} ({fmt(sec, med(s, name, sec))})")
    peers = [(med(s, name, key), s) for s in cols if not s.startswith("httplite") and s not in na
             and med(s, name, key) is not None]
    mine = med("httplite", name, key) if "httplite" not in na else None
    if peers:
        best, bs = (min if lower else max)(peers)
        row.append(f"{fmt(key, best)} ({label[bs]})")
    else:
        best = None
        row.append("–")
    sign = "≤" if lower else "≥"
    if best and mine is not None:
        ratio = mine / best
        met = ratio <= goal if lower else ratio >= goal
        row.append(f"{ratio:.2f}")
        row.append(f"{sign} {goal:.2f}: {'met' if met else 'not met'}")
    else:
        row.append("–")
        row.append(f"{sign} {goal:.2f}: –")
    print("| " + " | ".join(row) + " |")
for s, why in na.items():
    print(f"\n{label[s]}: n/a ({why.strip()})")
# How far the rounds agree: (max - min) / median of each cell's main figure.
print("\nSpread over the rounds (the slices), (max − min) / median of the figure above:\n")
print("| file | " + " | ".join(label[s] for s in cols) + " |")
print("|---" * (len(cols) + 1) + "|")
for name, text, key, lower, goal, sec in cells:
    row = [text.split(":")[0]]
    for s in cols:
        v = [x[key] for x in runs.get((s, name), [])]
        row.append(f"{(max(v) - min(v)) / statistics.median(v) * 100:.1f} % (n={len(v)})"
                   if len(v) > 1 else "–")
    print("| " + " | ".join(row) + " |")
PY
# The 16 MiB ratios, each from neighbouring slices, with their intervals.
verdict() { # goal op: reads ratio_ci.py's `A/B median [low, high] n=K`
    awk -v goal="$1" -v op="$2" '{
        lo = $3; hi = $4; gsub(/[\[,]/, "", lo); gsub(/\]/, "", hi)
        if ($2 == "n/a") v = "–"
        else if (op == "le") v = (hi + 0 <= goal) ? "met" : (lo + 0 > goal ? "not met" : "undecided (the interval holds the goal)")
        else v = (lo + 0 >= goal) ? "met" : (hi + 0 < goal ? "not met" : "undecided (the interval holds the goal)")
        print $0 " (goal " (op == "le" ? "≤ " : "≥ ") goal ": " v ")"
    }'
}
if [[ ",$CELL_LIST," == *",16m,"* ]] && [ -s "$OUT/best16" ]; then
    read -r BEST_MBS BEST_CPU < "$OUT/best16"
    {
        echo
        echo "16 MiB, httplite / the best peer, the median of the per-slice ratios [95 % interval] (scripts/lib/ratio_ci.py):"
        echo
        for a in httplite httplite-copy; do
            [ -n "${NA[$a]:-}" ] && continue
            [ "$BEST_MBS" != - ] && echo "throughput (MB/s): $(python3 scripts/lib/ratio_ci.py "$a" "$BEST_MBS" \
                < "$OUT/slices-mbs.csv" | verdict 0.95 ge)"
            [ "$BEST_CPU" != - ] && echo "server CPU per MB: $(python3 scripts/lib/ratio_ci.py "$a" "$BEST_CPU" \
                < "$OUT/slices-cpu_mb.csv" | verdict 1.00 le)"
            # Every peer, for the rows near 1 whose best peer changes between runs.
            peers=()
            for s in "${UP[@]}"; do [[ "$s" != httplite* ]] && peers+=("$s"); done
            echo "against each peer, throughput: $(python3 scripts/lib/ratio_ci.py "$a" "${peers[@]}" \
                < "$OUT/slices-mbs.csv" | cut -d' ' -f1-4 | paste -sd';' | sed 's/;/; /g')"
            echo "against each peer, CPU per MB: $(python3 scripts/lib/ratio_ci.py "$a" "${peers[@]}" \
                < "$OUT/slices-cpu_mb.csv" | cut -d' ' -f1-4 | paste -sd';' | sed 's/;/; /g')"
        done | sed 's/^/- /'
    } >> "$OUT/table.md"
fi
cat "$OUT/table.md"
