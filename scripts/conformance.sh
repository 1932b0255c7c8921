#!/usr/bin/env bash
# Differential conformance test of request heads: generates seeded
# heads (tests/conformance/gen.py), has our http1 decoder, Python's h11 and
# Node's llhttp judge each one, and compares the verdicts
# (tests/conformance/compare.py). Exits non-zero if both references agree on
# a head and http1 does not (outside compare.py's allowlist).
#
#   scripts/conformance.sh [--seed N] [--count N] [--short]
#
# --short: fixed seed, 1,600 heads, well under 60 s once built. Default: 5,000.
# Needs python3 (h11 goes into a venv, target/conformance-venv) and node
# (installed from Debian if missing). Outputs land in target/conformance/.
# Set HTTPLITE_HEAVY_LOCK=/path to run cargo under `flock` on that file.
set -euo pipefail
cd "$(dirname "$0")/.."

seed=1
count=5000
while [ $# -gt 0 ]; do
    case "$1" in
        --seed) seed="$2"; shift 2 ;;
        --count) count="$2"; shift 2 ;;
        --short) seed=1; count=1600; shift ;;
        *) echo "usage: $0 [--seed N] [--count N] [--short]" >&2; exit 2 ;;
    esac
done

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

if ! command -v node >/dev/null; then
    echo "==> installing nodejs (the llhttp judge)"
    as_root apt-get update -qq && as_root apt-get install -y -qq nodejs >/dev/null
fi

if ! python3 -c 'import ensurepip' 2>/dev/null; then
    echo "==> installing python3-venv (the h11 judge's virtual environment)"
    as_root apt-get update -qq && as_root apt-get install -y -qq python3-venv >/dev/null
fi

venv=target/conformance-venv
if ! "$venv/bin/python" -c 'import h11' 2>/dev/null; then
    echo "==> creating $venv with h11"
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q h11
fi

cargo_() { if [ -n "${HTTPLITE_HEAVY_LOCK:-}" ]; then flock "$HTTPLITE_HEAVY_LOCK" cargo "$@"; else cargo "$@"; fi; }
echo "==> building the http1 judge"
cargo_ build -q -p http1 --example judge

out=target/conformance
mkdir -p "$out"
echo "==> generating $count heads (seed $seed)"
python3 tests/conformance/gen.py --seed "$seed" --count "$count" > "$out/heads.tsv"
cut -f3 "$out/heads.tsv" > "$out/heads.hex"

echo "==> judging"
cargo_ run -q -p http1 --example judge < "$out/heads.hex" > "$out/ours.txt" &
ours=$!
"$venv/bin/python" tests/conformance/judge_h11.py < "$out/heads.hex" > "$out/h11.txt" &
h11=$!
node tests/conformance/judge_llhttp.js < "$out/heads.hex" > "$out/llhttp.txt"
wait "$ours"
wait "$h11"

python3 tests/conformance/compare.py --heads "$out/heads.tsv" --ours "$out/ours.txt" \
    --h11 "$out/h11.txt" --llhttp "$out/llhttp.txt" --details "$out/details.txt"
