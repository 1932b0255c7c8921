#!/usr/bin/env bash
# The repository describes the software as it is: its prose names no
# issue and no commit (history is `git log`).
#
# Checks the prose of every tracked file:
#
# - Markdown (*.md): the text outside fenced code blocks and `code spans`;
# - Rust (*.rs): `//`, `//!` and `///` comments, outside `code spans`;
# - shell and Python (*.sh, *.py): `#` comment lines (not the `#!` line).
#
# and fails on
#
# - an issue or pull-request reference: `#12` (a `#` and digits, not
#   after a letter or digit, so `PKCS#8` passes), `issue 21`, `issue #21`,
#   `PR 3`, `pull request 3`;
# - a word that looks like a commit hash: 7 to 40 hex digits with at least
#   one digit and one letter (`fa88d68`). A hex constant (`0x1f2e3d4c`)
#   is not such a word, nor is one with other letters (`sha256sum`).
#
# A line that must carry such a word (a checksum in an example, say) may
# say so with the marker `history-check: allow`.
#
# Prints each offence as `file:line: message` and exits 1 if there is any.
#
# Usage: scripts/check-history.sh
set -euo pipefail
cd "$(dirname "$0")/.."
exec python3 - <<'EOF'
import re, subprocess, sys

out = subprocess.run(["git", "ls-files", "-z", "--", "*.md", "*.rs", "*.sh", "*.py"],
                     check=True, capture_output=True).stdout
files = [p for p in out.decode("utf-8", "surrogateescape").split("\0") if p]
# New files not yet added count too, so that the check can run before a commit.
out = subprocess.run(["git", "ls-files", "-z", "--others", "--exclude-standard", "--",
                      "*.md", "*.rs", "*.sh", "*.py"], check=True, capture_output=True).stdout
files += [p for p in out.decode("utf-8", "surrogateescape").split("\0") if p]

# Built from pieces so that this script's own comments do not match.
ALLOW = "history-check" + ": allow"
ISSUE = re.compile(
    r"(?<![\w&/#])#[0-9]+\b"
    r"|\b(?:[Ii]ssues?|PRs?|[Pp]ull requests?)\s+#?[0-9]+\b")
HASH = re.compile(r"\b(?=[0-9a-f]*[0-9])(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}\b")
CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1")
FENCE = re.compile(r"^\s{0,3}(`{3,}|~{3,})")
RUST_COMMENT = re.compile(r"^\s*//")
# A trailing comment after code: `//` after whitespace, not inside a string
# on the same line (an even number of quotes before it).
RUST_TRAILING = re.compile(r"\s//")
SCRIPT_COMMENT = re.compile(r"^\s*#(?!!)")

def prose(path, lines):
    """(line number, text) pairs of the file's prose."""
    if path.endswith(".md"):
        fence = None
        for n, line in enumerate(lines, 1):
            m = FENCE.match(line)
            if m:
                run = m.group(1)
                if fence is None:
                    fence = run
                elif run[0] == fence[0] and len(run) >= len(fence):
                    fence = None
                continue
            if fence is None:
                yield n, line
    elif path.endswith(".rs"):
        for n, line in enumerate(lines, 1):
            if RUST_COMMENT.match(line):
                yield n, line
                continue
            for m in RUST_TRAILING.finditer(line):
                if line[:m.start()].count('"') % 2 == 0:
                    yield n, line[m.start():]
                    break
    else:
        for n, line in enumerate(lines, 1):
            if SCRIPT_COMMENT.match(line):
                yield n, line

problems = []
for path in files:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
    except (FileNotFoundError, IsADirectoryError):
        continue
    for n, text in prose(path, lines):
        if ALLOW in text:
            continue
        text = CODE_SPAN.sub("``", text)
        for m in ISSUE.finditer(text):
            problems.append(f"{path}:{n}: an issue reference: {m.group(0)!r}")
        for m in HASH.finditer(text):
            problems.append(f"{path}:{n}: a commit-hash-like word: {m.group(0)!r}")

for p in problems:
    print(p)
if problems:
    print(f"check-history: FAILED, {len(problems)} reference(s) to the project's "
          "history in prose (describe the software as it is; history is git log)",
          file=sys.stderr)
    sys.exit(1)
print(f"check-history: ok ({len(files)} files)")
EOF
