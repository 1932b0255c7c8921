#!/usr/bin/env bash
# A CPU cap and exact CPU accounting for a benchmarked server, by cgroup.
# Source it (needs root, or a delegated cgroup):
#   cap_create NAME           a cgroup for one server; no cap yet
#   cap_set NAME PCT          cap it at PCT % of one CPU (0 = no cap)
#   cap_spawn NAME CMD...     start CMD in the background inside it; $! is CMD's PID
#   cap_usage_ns NAME         CPU time of everything that ever ran in it, in ns
#   cap_system_ns NAME        the part of that spent in the kernel, in ns
#   cap_throttled NAME        how many CFS periods it was throttled in so far
#   cap_remove NAME           remove it (after its processes have exited)
#   cap_remove_all            remove every cgroup this shell created (for an EXIT trap)
#
# Why a cap: a server that is not the bottleneck sleeps in epoll_wait between
# requests, and how often it sleeps (one wake per request at low load, one per
# batch of hundreds when busy) decides most of its CPU per request. When the
# load generator is the bottleneck, that ratio drifts between runs, and the
# figure jumps between two values: how busy the server happened to be, not
# what a request costs. Capped below what the load generator can drive, every
# server is saturated in every run: it always has a batch waiting, and its CPU
# per request is the cost of a request at full load (docs/benchmarks.md).
#
# Why a cgroup for accounting: its counter includes every thread and every
# process ever started in it (nginx's workers, a forked child that already
# exited and was reaped), which /proc/PID/stat of a live process does not.
#
# Both cgroup versions: v2 with the cpu controller enabled (cpu.max, cpu.stat
# usage_usec), or v1 (cpu.cfs_quota_us and cpuacct.usage, the layout of these
# machines: the cpu controller sits on v1, the unified tree has none).
# The period is 10 ms (CAP_PERIOD_US overrides it): with 100 ms the server runs 50 ms and sleeps 50 ms at a
# 50 % cap, and the run holds fewer periods to average.

CAP_PERIOD_US=${CAP_PERIOD_US:-10000}
CAP_CREATED=()

cap_mode() {
    if [ -f /sys/fs/cgroup/cgroup.controllers ] && grep -qw cpu /sys/fs/cgroup/cgroup.controllers; then
        echo v2
    elif [ -d /sys/fs/cgroup/cpu ] && [ -d /sys/fs/cgroup/cpuacct ]; then
        echo v1
    else
        echo none
    fi
}

cap_dirs() { # NAME -> the cgroup directories holding it (v1: cpu and cpuacct)
    case "$(cap_mode)" in
        v2) echo "/sys/fs/cgroup/$1" ;;
        v1) if [ "$(readlink -f /sys/fs/cgroup/cpu)" = "$(readlink -f /sys/fs/cgroup/cpuacct)" ]; then
                echo "/sys/fs/cgroup/cpu/$1"
            else
                echo "/sys/fs/cgroup/cpu/$1 /sys/fs/cgroup/cpuacct/$1"
            fi ;;
    esac
}

cap_create() {
    local d
    [ "$(cap_mode)" = none ] && { echo "cpu-cap: no cgroup cpu controller on this machine" >&2; return 1; }
    if [ "$(cap_mode)" = v2 ]; then
        grep -qw cpu /sys/fs/cgroup/cgroup.subtree_control ||
            echo +cpu > /sys/fs/cgroup/cgroup.subtree_control
    fi
    for d in $(cap_dirs "$1"); do mkdir -p "$d"; done
    CAP_CREATED+=("$1")
}

cap_set() { # NAME PCT
    local quota=-1
    [ "$2" -gt 0 ] && quota=$((CAP_PERIOD_US * $2 / 100))
    case "$(cap_mode)" in
        v2) if [ "$quota" = -1 ]; then echo "max $CAP_PERIOD_US"; else echo "$quota $CAP_PERIOD_US"; fi \
                > "/sys/fs/cgroup/$1/cpu.max" ;;
        v1) echo "$CAP_PERIOD_US" > "/sys/fs/cgroup/cpu/$1/cpu.cfs_period_us"
            echo "$quota" > "/sys/fs/cgroup/cpu/$1/cpu.cfs_quota_us" ;;
    esac
}

cap_spawn() { # NAME CMD... ; the shell joins the cgroup, then becomes CMD (same PID)
    local dirs
    dirs=$(cap_dirs "$1")
    shift
    # A failed join must not start the server outside the cgroup (its CPU
    # would read 0 and the cap not apply): exit 97 instead.
    sh -c 'for d in $0; do echo $$ > "$d/cgroup.procs" || exit 97; done; exec "$@"' "$dirs" "$@" &
}

cap_usage_ns() {
    case "$(cap_mode)" in
        v2) awk '/^usage_usec/ { printf "%.0f\n", $2 * 1000 }' "/sys/fs/cgroup/$1/cpu.stat" ;;
        v1) cat "/sys/fs/cgroup/cpuacct/$1/cpuacct.usage" ;;
    esac
}

cap_system_ns() {
    case "$(cap_mode)" in
        v2) awk '/^system_usec/ { printf "%.0f\n", $2 * 1000 }' "/sys/fs/cgroup/$1/cpu.stat" ;;
        v1) cat "/sys/fs/cgroup/cpuacct/$1/cpuacct.usage_sys" ;;
    esac
}

cap_throttled() {
    local d
    d=$(cap_dirs "$1" | cut -d' ' -f1)
    awk '/^nr_throttled/ { print $2 }' "$d/cpu.stat"
}

cap_remove() { # rmdir fails while a process is inside: wait for stragglers briefly
    local d n keep=()
    for d in $(cap_dirs "$1"); do
        for _ in $(seq 1 50); do
            [ -d "$d" ] || break
            rmdir "$d" 2>/dev/null && break
            sleep 0.1
        done
    done
    for n in "${CAP_CREATED[@]+"${CAP_CREATED[@]}"}"; do [ "$n" != "$1" ] && keep+=("$n"); done
    CAP_CREATED=("${keep[@]+"${keep[@]}"}")
}

cap_remove_all() {
    local n
    for n in "${CAP_CREATED[@]+"${CAP_CREATED[@]}"}"; do cap_remove "$n"; done
}
