#!/usr/bin/env bash
# Runs the fuzz targets in fuzz/ (cargo-fuzz, libFuzzer with AddressSanitizer)
# for a bounded time each, then prints one summary line per target:
# executions, executions per second, seconds, corpus size, crashes.
# Exits non-zero if any target crashed (or failed to run).
#
#   scripts/fuzz.sh                      # every target, 60 s each
#   scripts/fuzz.sh --time 600           # 10 minutes each
#   scripts/fuzz.sh --target connection  # one target
#
# Targets: http1_head, http1_body, connection, tls_connection, proxy_protocol (see
# fuzz/fuzz_targets/*.rs).
# The committed seeds in fuzz/corpus/<target>/ are only read; what the
# fuzzer learns goes to fuzz/target/corpus/<target>/ (kept between runs,
# git-ignored), and crashing inputs to fuzz/artifacts/<target>/.
# Reproduce a crash with:
#   cd fuzz && RUSTC_BOOTSTRAP=1 cargo fuzz run <target> <crash-file>
#
# NOT part of CI (scripts/test.sh): it needs cargo-fuzz, which this script
# installs if missing, and nightly-only compiler flags (sanitizers), which
# RUSTC_BOOTSTRAP=1 unlocks on the stable toolchain. On a shared machine, pin
# it to one core: taskset -c 1 scripts/fuzz.sh ...
set -euo pipefail
cd "$(dirname "$0")/.."

TIME=60
TARGETS=()
while [ $# -gt 0 ]; do
    case "$1" in
        --time) TIME="$2"; shift 2 ;;
        --target) TARGETS+=("$2"); shift 2 ;;
        -h|--help) sed -n '2,21p' "$0"; exit 0 ;;
        *) echo "unknown argument: $1 (see --help)" >&2; exit 2 ;;
    esac
done
if [ ${#TARGETS[@]} -eq 0 ]; then
    TARGETS=(http1_head http1_body connection tls_connection proxy_protocol)
fi
case "$TIME" in
    ''|*[!0-9]*) echo "--time takes whole seconds" >&2; exit 2 ;;
esac

if ! command -v cargo-fuzz >/dev/null; then
    echo "==> installing cargo-fuzz"
    cargo install cargo-fuzz --locked
fi

export RUSTC_BOOTSTRAP=1
cd fuzz
echo "==> cargo fuzz build"
cargo fuzz build

SUMMARY=()
FAILED=0
LOGDIR=target/fuzz-logs
mkdir -p "$LOGDIR"
for t in "${TARGETS[@]}"; do
    if [ ! -d "corpus/$t" ]; then
        echo "no such target: $t" >&2
        exit 2
    fi
    work="target/corpus/$t"
    mkdir -p "$work" "artifacts/$t"
    log="$LOGDIR/$t.log"
    before=$(find "artifacts/$t" -type f | wc -l)
    echo "==> fuzzing $t for ${TIME}s (log: fuzz/$log)"
    status=0
    # The first corpus directory receives new inputs; the seeds stay as
    # committed. -timeout: one input running 10 s is a hang (a crash).
    cargo fuzz run "$t" "$work" "corpus/$t" -- \
        -max_total_time="$TIME" -timeout=10 -rss_limit_mb=2048 \
        -print_final_stats=1 >"$log" 2>&1 || status=$?
    tail -n 5 "$log"
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
    rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -n 1)
    secs=$(sed -n 's/^Done [0-9]* runs in \([0-9]*\) second.*/\1/p' "$log" | tail -n 1)
    corpus=$(find "$work" -type f | wc -l)
    after=$(find "artifacts/$t" -type f | wc -l)
    crashes=$((after - before))
    if [ "$status" -ne 0 ] && [ "$crashes" -eq 0 ]; then
        crashes="?"  # it failed without leaving an artifact: see the log
    fi
    if [ "$status" -ne 0 ]; then
        FAILED=1
        grep -h -m 3 -E "panicked at|ERROR: (AddressSanitizer|libFuzzer)|SUMMARY" "$log" || true
        ls -t "artifacts/$t" | head -n 3 | sed "s|^|    artifact: fuzz/artifacts/$t/|"
    fi
    SUMMARY+=("$(printf 'fuzz %-11s executions %s, %s exec/s, %s s, corpus %s (+%s seeds), crashes %s' \
        "$t" "${execs:-?}" "${rate:-?}" "${secs:-?}" "$corpus" \
        "$(find "corpus/$t" -type f | wc -l)" "$crashes")")
done

echo "==> summary"
printf '%s\n' "${SUMMARY[@]}"
exit "$FAILED"
