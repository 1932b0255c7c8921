#!/usr/bin/env bash
# Builds the tour (docs/) as an mdBook into target/book/docs/ and checks it:
# every {{#include}} expanded, every link and image resolving, every page in
# docs/ listed in docs/SUMMARY.md. Open target/book/docs/index.html.
#
#   scripts/book.sh            install mdbook if missing, build, check
#   scripts/book.sh --check    check the sources only (no mdbook needed;
#                              what scripts/test.sh runs, see README)
#
# Code shown in the book is included from the real files with
# {{#include}} of an example file and an anchor (the anchor lines,
# `// ANCHOR: name` and `// ANCHOR_END: name`, are in the example), so it
# cannot drift from what `cargo run --example` runs.
set -euo pipefail
cd "$(dirname "$0")/.."

MDBOOK_VERSION=0.5.4 # pinned so that the book builds the same everywhere

python3 scripts/lib/book_check.py sources
[ "${1:-}" = "--check" ] && exit 0

if ! command -v mdbook >/dev/null || ! mdbook --version | grep -q "v$MDBOOK_VERSION"; then
    echo "==> installing mdbook $MDBOOK_VERSION (cargo install --locked; a few minutes, once)"
    cargo install --locked --version "$MDBOOK_VERSION" mdbook
fi

rm -rf target/book && mkdir -p target # a fresh clone has no target/ yet
mdbook build 2>&1 | tee target/book-build.log
# mdBook reports a missing include file as an error but still builds.
if grep -q "ERROR" target/book-build.log; then
    echo "book.sh: mdbook reported errors (above)" >&2
    exit 1
fi
# mdBook renders docs/README.md as index.html but leaves links to
# README.md as they are: give them their page.
cp target/book/docs/index.html target/book/docs/README.html
python3 scripts/lib/book_check.py built target/book/docs
echo "book.sh: open target/book/docs/index.html"
