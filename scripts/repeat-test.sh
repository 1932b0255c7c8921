#!/usr/bin/env bash
# Runs one server test N times in a row on each runtime, alone, and counts
# the failures: for a test suspected of flaking (a timing race shows as a
# failure in some runs only). The test binary is built once; each run is
# its own process; a failure's output is kept in target/repeat/.
#
# Usage: scripts/repeat-test.sh TEST_NAME [N] [RUNTIMES]
#   e.g. scripts/repeat-test.sh accept_storm::emfile_storm_sheds_without_spinning_and_the_server_recovers 50
# RUNTIMES: comma-separated (default: every runtime of the suite).
# Prints one line per runtime, "RUNTIME: P passed, F failed of N", and exits
# 1 if any run failed.
set -euo pipefail
cd "$(dirname "$0")/.."
TEST=${1:?usage: scripts/repeat-test.sh TEST_NAME [N] [RUNTIMES]}
N=${2:-50}
RUNTIMES=${3:-stackless,stackful,threads,threadpool,fork,uring}
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
BIN=$(cargo test -p httplite --test server --no-run --message-format=json 2>/dev/null \
    | python3 -c 'import json,sys
for l in sys.stdin:
    m = json.loads(l)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] == "server":
        print(m["executable"])' | tail -1)
[ -x "$BIN" ] || { echo "repeat-test.sh: the server test binary was not built" >&2; exit 2; }
OUT=target/repeat
mkdir -p "$OUT"
bad=0
for rt in ${RUNTIMES//,/ }; do
    pass=0 fail=0
    for i in $(seq 1 "$N"); do
        log="$OUT/${rt}-${i}.log"
        if HTTPLITE_TEST_RUNTIMES=$rt timeout 300 "$BIN" --exact "$TEST" --test-threads 1 \
            >"$log" 2>&1 && grep -q "test result: ok. 1 passed" "$log"; then
            pass=$((pass + 1))
            rm -f "$log"
        else
            fail=$((fail + 1))
        fi
    done
    echo "$rt: $pass passed, $fail failed of $N"
    [ "$fail" = 0 ] || bad=1
done
exit "$bad"
