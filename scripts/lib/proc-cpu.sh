#!/usr/bin/env bash
# CPU time of a server, for the benchmarks. Source it:
#   cpu_ticks PID        utime + stime of one process (all its threads), in clock ticks
#   cpu_ticks_tree PID   the same summed over PID and its live descendants (nginx's
#                        master + worker), depth-bounded; a process that exits between
#                        the listing and the read counts 0
# Ticks are 1/$(getconf CLK_TCK) s. The fields are read after the last ')' so a
# command name with spaces cannot shift them.
cpu_ticks() {
    local line rest
    read -r line 2>/dev/null < "/proc/$1/stat" || { echo 0; return; }
    rest=${line##*) }
    # shellcheck disable=SC2086
    set -- $rest
    echo $(( ${12} + ${13} ))
}

proc_tree() { # PID -> PID and its descendants, one a line (at most 4 levels)
    local level=($1) next depth p
    for depth in 1 2 3 4; do
        [ ${#level[@]} -eq 0 ] && break
        next=()
        for p in "${level[@]}"; do
            echo "$p"
            # shellcheck disable=SC2207
            next+=($(cat /proc/"$p"/task/*/children 2>/dev/null))
        done
        level=("${next[@]}")
    done
}

cpu_ticks_tree() {
    local total=0 p
    for p in $(proc_tree "$1"); do total=$(( total + $(cpu_ticks "$p") )); done
    echo "$total"
}
