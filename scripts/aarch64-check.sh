#!/usr/bin/env bash
# The coroutine crate on aarch64, on this x86_64 machine: cross-compiled and
# run under qemu-aarch64 (user-mode emulation), with and without the
# `fp-state` feature. This is what checks crates/coroutine/src/switch/
# aarch64.rs, which CI (x86_64 only) never runs.
#
# Every test binary of the crate runs whole except tests/overflow.rs, which
# is left out and says so: its tests re-execute the test binary as a child
# process, and a child started with exec(2) is not under qemu (this machine
# has no binfmt_misc entry for aarch64), so the child cannot start at all.
# tests/switch_registers.rs is x86_64-only and runs no test here. Doc tests
# are not run either: cross-compiled doc tests need a nightly cargo flag
# (they run on x86_64 in CI).
#
# Needs the Rust target (`rustup target add aarch64-unknown-linux-gnu`:
# rustup's own server, which a machine may not reach; the script says so
# and exits 2 if the target is missing) and two Debian packages, installed
# here if absent: gcc-aarch64-linux-gnu (the linker and libc) and
# qemu-user.
#
# Usage: scripts/aarch64-check.sh
set -euo pipefail
cd "$(dirname "$0")/.."

TARGET=aarch64-unknown-linux-gnu
if ! rustup target list --installed 2>/dev/null | grep -qx "$TARGET"; then
    echo "aarch64-check: the $TARGET target is not installed; run: rustup target add $TARGET" >&2
    exit 2
fi
if ! command -v aarch64-linux-gnu-gcc >/dev/null || ! command -v qemu-aarch64 >/dev/null; then
    echo "==> installing gcc-aarch64-linux-gnu and qemu-user"
    SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
    $SUDO apt-get update -qq
    $SUDO apt-get install -y -qq gcc-aarch64-linux-gnu qemu-user >/dev/null
fi

export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER="qemu-aarch64 -L /usr/aarch64-linux-gnu"

# Every test target of the crate but tests/overflow.rs (see above).
TESTS=(--lib)
for f in crates/coroutine/tests/*.rs; do
    name=$(basename "$f" .rs)
    [ "$name" = overflow ] || TESTS+=(--test "$name")
done
echo "==> not run under qemu: tests/overflow.rs (its child processes cannot start: no binfmt_misc)"

status=0
for features in "" "fp-state"; do
    echo "==> coroutine on $TARGET under qemu-aarch64, features: ${features:-default}"
    log=$(mktemp)
    if cargo test -q --target "$TARGET" -p coroutine ${features:+--features "$features"} \
        "${TESTS[@]}" >"$log" 2>&1; then
        grep -E '^test result' "$log" |
            awk '{p += $4; f += $6} END {printf "    %d passed, %d failed\n", p, f}'
    else
        cat "$log"
        status=1
    fi
    rm -f "$log"
done
exit $status
