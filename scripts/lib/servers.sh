# Bookkeeping for scripts that start servers (bench-static.sh, bench-tls.sh):
# every started PID goes into RUNNING, and the script's exit trap calls
# stop_running. Needs proc_tree from scripts/lib/proc-cpu.sh.

RUNNING=()      # PIDs of started servers (nginx: the master), still to stop

stop_pids() {   # PID... : TERM, wait up to 5 s, then KILL what is left (incl. descendants)
    local p tree=() left
    for p in "$@"; do
        # shellcheck disable=SC2207
        tree+=($(proc_tree "$p"))
        kill -TERM "$p" 2>/dev/null || true
    done
    for _ in $(seq 1 50); do
        left=0
        for p in "${tree[@]}"; do kill -0 "$p" 2>/dev/null && left=1; done
        [ "$left" = 0 ] && break
        sleep 0.1
    done
    for p in "${tree[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
    for p in "$@"; do wait "$p" 2>/dev/null || true; done
}

stop_running() { # stops every server still in RUNNING
    [ ${#RUNNING[@]} -gt 0 ] && stop_pids "${RUNNING[@]}"
    RUNNING=()
}
