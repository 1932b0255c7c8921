#!/usr/bin/env bash
# Every check a submission must pass: formatting, lints, and all tests
# (unit, integration over real sockets, doc tests). `.ci/run` calls this.
set -euo pipefail
cd "$(dirname "$0")/.."

# Debian packages the steps need, installed when missing: curl (the server's
# integration tests drive it with real curl) and python3 (valgrind.sh reads
# cargo's JSON with it; soak.sh drives its checked load with it).
install_if_missing() { # COMMAND PACKAGE WHY
    command -v "$1" >/dev/null && return 0
    echo "==> installing $2 (needed by $3)"
    if [ "$(id -u)" = 0 ]; then
        apt-get update -qq && apt-get install -y -qq "$2" >/dev/null
    else
        sudo apt-get update -qq && sudo apt-get install -y -qq "$2" >/dev/null
    fi
}
install_if_missing curl curl "the server tests"
install_if_missing openssl openssl "the TLS tests (s_client, RSA test keys)"
install_if_missing node nodejs "the TLS tests (Node's https client)"
install_if_missing h2load nghttp2-client "the TLS tests (h2load --h1)"
install_if_missing ab apache2-utils "the server tests (ab -k, slow_clients.rs)"
install_if_missing python3 python3 "scripts/valgrind.sh and scripts/soak.sh"

# The reverse proxy's real-client test drives Python's `websockets` (from
# PyPI) and `http.client` through the proxy: a venv in target/, made once.
if ! python3 -c 'import ensurepip' 2>/dev/null; then
    echo "==> installing python3-venv (the proxy tests' virtual environment)"
    if [ "$(id -u)" = 0 ]; then
        apt-get update -qq && apt-get install -y -qq python3-venv >/dev/null
    else
        sudo apt-get update -qq && sudo apt-get install -y -qq python3-venv >/dev/null
    fi
fi
test_venv=target/test-venv
if ! "$test_venv/bin/python" -c 'import websockets' 2>/dev/null; then
    echo "==> creating $test_venv with websockets"
    python3 -m venv "$test_venv"
    "$test_venv/bin/pip" install -q websockets==15.0.1
fi

# Every step has a time limit, so that a hang fails CI at once with the
# step's name instead of stalling until the CI job's own limit. The limits
# are several times the steps' usual times on the project's 2-core machine
# (see README.md for the whole run). --foreground: the step keeps the terminal (cargo's output)
# and is still killed at the limit.
step() { # NAME MINUTES COMMAND...
    local name=$1 minutes=$2 rc=0
    shift 2
    echo "==> $name"
    timeout --foreground "${minutes}m" "$@" || rc=$?
    if [ "$rc" = 124 ]; then
        echo "test.sh: step '$name' timed out after $minutes min" >&2
    elif [ "$rc" != 0 ]; then
        echo "test.sh: step '$name' failed (exit $rc)" >&2
    fi
    [ "$rc" = 0 ] || exit "$rc"
}

# A step that selects tests by name: each of its name filters (the words
# after `--` that are not options, nor the value of a `--skip`) must select
# at least one test that ran, or a renamed test would turn it into a silent
# pass (one matching filter must not hide another that matches nothing).
filtered_step() { # NAME MINUTES COMMAND...
    local name=$1 out filters=() after=0 skip=0 arg missing=()
    for arg in "${@:3}"; do
        if [ "$after" = 0 ]; then [ "$arg" = -- ] && after=1; continue; fi
        if [ "$skip" = 1 ]; then skip=0; continue; fi
        case "$arg" in
            --skip) skip=1 ;;
            -*) ;;
            *) filters+=("$arg") ;;
        esac
    done
    out=$(mktemp)
    step "$@" 2>&1 | tee "$out"
    [ "${PIPESTATUS[0]}" = 0 ] || { rm -f "$out"; exit 1; }
    for arg in "${filters[@]}"; do
        grep -qE "^test [^ ]*${arg//./\\.}[^ ]* \.\.\. ok$" "$out" || missing+=("$arg")
    done
    if [ "${#filters[@]}" = 0 ] && ! grep -qE '^test .* \.\.\. ok$' "$out"; then
        missing+=("(any test)")
    fi
    rm -f "$out"
    if [ "${#missing[@]}" != 0 ]; then
        echo "test.sh: step '$name': these name filters selected no test that ran: ${missing[*]}" >&2
        exit 1
    fi
}

# Integration tests open thousands of sockets; the hard limit allows it.
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

step "cargo fmt --all --check" 5 cargo fmt --all --check
# The benchmark peers and the fuzz targets are workspaces of their own.
step "cargo fmt --check (benches/peers)" 2 cargo fmt --check --manifest-path benches/peers/Cargo.toml
step "cargo fmt --check (fuzz)" 2 cargo fmt --check --manifest-path fuzz/Cargo.toml

# No file links to or names a path outside the repository (a clone must
# stand on its own), and every relative link in the Markdown resolves.
step "scripts/check-self-contained.sh" 2 scripts/check-self-contained.sh

# The prose (Markdown, code comments) names no issue and no commit: it
# describes the software as it is, and history is `git log`.
step "scripts/check-history.sh" 2 scripts/check-history.sh

# The tour as a book: every page listed in docs/SUMMARY.md, every
# {{#include}} and its anchor present, every link and image resolving, in
# the sources and in the built book. On a fresh machine the step installs
# mdbook first (cargo install: 1 min 44 s of compiling on the project's
# machine), then builds in about a second.
step "scripts/book.sh" 8 scripts/book.sh

# The site never depends on a runtime crate (reactor, executor, coroutine,
# dispatch): `cargo tree -p site -e normal` must name none of them.
step "scripts/check-site-deps.sh" 2 scripts/check-site-deps.sh

step "cargo clippy --workspace --all-targets -- -D warnings" 30 \
    cargo clippy --workspace --all-targets -- -D warnings

# Every public item is documented (missing_docs is denied in the runtime
# crates) and no intra-doc link is broken.
step "cargo doc --workspace --no-deps (warnings are errors)" 20 \
    env RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps

step "cargo test --workspace" 40 cargo test --workspace

# The coroutine crate's `fp-state` build (the switch saves and restores
# MXCSR and the x87 control word) is a different context switch, with
# tests of its own (`each_context_keeps_its_own_rounding_mode`): build and
# run it on x86_64 too.
step "cargo test -p coroutine --features fp-state" 15 \
    cargo test -p coroutine --features fp-state

# The protocol and static-file tests again, every server HTTPS and every
# client over TLS (tests/server/pki.rs), on every runtime. Skipped by name, because they work
# the raw socket under the client (a write from a second thread on a clone,
# a peek at the socket), which a TLS session cannot share: the sleeper
# peek in basics, three pipelining tests and one limits test.
filtered_step "cargo test --test server over TLS (HTTPLITE_TEST_TLS=1)" 15 \
    env HTTPLITE_TEST_TLS=1 cargo test -p httplite --test server -- \
    basics:: pipelining:: static_files:: limits:: curl:: conformance:: \
    file_features:: precompressed:: file_cache:: timeouts:: large_files:: exposure:: \
    reverse_proxy:: shutdown::sigterm_closes_idle_connections_at_once \
    shutdown::a_connection_accepted_just_before_sigterm \
    --skip basics::sleep_does_not_block_other_connections \
    --skip basics::the_last_answer_arrives_with_the_fin \
    --skip pipelining::chunked_echo_round_trip \
    --skip pipelining::content_length_echo_streams_a_large_body \
    --skip pipelining::many_pipelined_requests_in_one_write \
    --skip limits::chunked_body_over_max_body_is_cut_off

# Request heads judged by http1 and by two parsers nobody here wrote (h11,
# llhttp): 1,600 seeded heads, a few seconds (plus a venv and nodejs on a
# fresh machine). The full run is `scripts/conformance.sh` (5,000 heads; any
# seed with --seed).
step "scripts/conformance.sh --short" 10 scripts/conformance.sh --short

step "scripts/cluster-test.sh --quick (HAProxy sending PROXY v2, 3 instances, 20 s)" 5 \
    scripts/cluster-test.sh --quick

# The dashboard in headless Chromium (installed if missing): the page's
# figures against /_httplite/stats under load, its Server-Sent Events, the
# directory listing; ~15 s plus the release build. Fails if Chromium
# cannot run. The full run is `scripts/browser-test.sh --all`.
step "scripts/browser-test.sh --short" 10 scripts/browser-test.sh --short

# `--trace` is a cargo feature (compiled out of the default build); its own
# tests run against a traced build, plus the trace module's units.
step "cargo clippy -p httplite --all-targets --features trace" 20 \
    cargo clippy -p httplite --all-targets --features trace -- -D warnings
filtered_step "cargo test -p reactor --features trace --lib trace" 15 \
    cargo test -p reactor --features trace --lib trace
filtered_step "cargo test -p httplite --features trace --test server observability uring:: upgrade::an_upgrade_keeps_both_processes_timelines" 20 \
    cargo test -p httplite --features trace --test server -- observability uring:: \
    upgrade::an_upgrade_keeps_both_processes_timelines
# The docs' timeline pictures (docs/timeline.md) are drawn by this script:
# it must still read the committed captures.
step "scripts/timeline-svg.py on docs/img's captures" 2 bash -c '
    out=$(mktemp -d); trap "rm -rf $out" EXIT
    for rt in stackless stackful; do
        python3 scripts/timeline-svg.py "docs/img/timeline-$rt.json" "$out/$rt.svg"
        grep -q "answers GET /_httplite/plaintext" "$out/$rt.svg"
    done
    python3 scripts/timeline-svg.py docs/img/timeline-listing.json "$out/listing.svg" --path /sub/
    grep -q "pool0 runs the listing" "$out/listing.svg"'

# Memory errors and definite leaks in the runtime crates' own test suites
# under valgrind memcheck (reactor, executor, coroutine, dispatch, pool,
# proactor; their test binaries are built above; see valgrind.sh for the
# proactor's io_uring concessions). Installs valgrind if missing.
step "scripts/valgrind.sh" 30 scripts/valgrind.sh

# A short soak of every event-loop and thread runtime (20 s each, ~2.5 min with the release build):
# checked mixed load plus every fault kind, fd/RSS growth, fds at rest, exit 0
# on SIGTERM. All four because each has its own connection driver (a
# threads-only write-timeout bug showed up this way); the at-rest fd check
# catches a leak however short the run. The full run is `scripts/soak.sh --all`.
step "scripts/soak.sh --all --duration 20 --requests 100000" 20 \
    scripts/soak.sh --all --duration 20 --requests 100000
