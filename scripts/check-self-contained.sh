#!/usr/bin/env bash
# The repository stands on its own: no tracked file may point outside it.
#
# Checks every file `git ls-files` lists (text files; binary ones skipped):
#
# - Markdown (*.md): every relative link target, in `[text](target)`,
#   `![alt](target)`, `[id]: target` and HTML `href="..."`/`src="..."`, is
#   resolved against the file's directory (a leading `/` against the
#   repository root, as forges do), and must stay inside the repository and
#   name a file or directory that is there (tracked, or new and not
#   ignored). `#fragments` are not checked. Links inside fenced code blocks
#   and `code spans` are not links and are skipped. `file:` URLs are refused.
# - Every file: a relative path that starts with `../` (at the start of a
#   word or string, not inside a URL path like `/a/../b`) must not climb out
#   of the repository when resolved against the file's directory. Whether it
#   exists is not checked: code may name paths it creates. A line that
#   carries a deliberate one (a traversal test, say) may say so with the
#   marker `self-contained: allow`.
# - Every file: no mention of a `shared` folder in the checkout's parent
#   directory (`..` then `/shared`): a clone does not have it.
#
# Prints each offence as `file:line: message` and exits 1 if there is any.
#
# Usage: scripts/check-self-contained.sh
set -euo pipefail
cd "$(dirname "$0")/.."
exec python3 - <<'EOF'
import os, re, subprocess, sys
from urllib.parse import unquote

root = os.path.realpath(os.getcwd())

def git_files(*args):
    out = subprocess.run(["git", "ls-files", "-z", *args], check=True,
                         capture_output=True).stdout
    return [p for p in out.decode("utf-8", "surrogateescape").split("\0") if p]

tracked = git_files()
# What a link may point at: tracked files, plus new files not yet added
# (so that the check can run before a commit) but never ignored ones such
# as target/, which a fresh clone does not have.
present = {p for p in tracked + git_files("--others", "--exclude-standard")
           if os.path.lexists(p)}
dirs = {""}
for p in present:
    d = os.path.dirname(p)
    while d not in dirs:
        dirs.add(d)
        d = os.path.dirname(d)

# Built from pieces so that this script does not match itself.
FORBIDDEN = [".." + "/shared"]
ALLOW = "self-contained: allow"

MD_INLINE = re.compile(r'\]\(\s*(<[^>]*>|[^)\s]+)(?:\s+(?:"[^"]*"|\'[^\']*\'|\([^)]*\)))?\s*\)')
MD_REFDEF = re.compile(r'^\s{0,3}\[[^\]]+\]:\s*(<[^>]*>|\S+)')
HTML_ATTR = re.compile(r'\b(?:href|src)\s*=\s*"([^"]*)"')
CODE_SPAN = re.compile(r'(`+)(?:(?!\1).)+?\1')
FENCE = re.compile(r'^\s{0,3}(`{3,}|~{3,})')
SCHEME = re.compile(r'^[A-Za-z][A-Za-z0-9+.-]*:')
# One or more `../` and the path after them, not preceded by a path or word
# character (so `/a/../b` inside a URL is not one).
UP_PATH = re.compile(r'(?<![\w./%~$-])((?:\.\./)+[\w.\-/]*)')

problems = []
links_checked = 0

def report(path, lineno, msg):
    problems.append((path, lineno, msg))

def inside(rel):
    """The repository-relative form of a normalised path, or None."""
    if rel == ".":
        return ""
    if rel == ".." or rel.startswith("../") or os.path.isabs(rel):
        return None
    return rel

def check_link(path, lineno, target):
    global links_checked
    target = target.strip()
    if target.startswith("<") and target.endswith(">"):
        target = target[1:-1].strip()
    if not target or target.startswith("#"):
        return
    if target.lower().startswith("file:"):
        report(path, lineno, f"link to a local file URL: {target}")
        return
    if target.startswith("//") or SCHEME.match(target):
        return  # http:, https:, mailto:, ...: not a path in this repository
    links_checked += 1
    bare = unquote(target.split("#", 1)[0].split("?", 1)[0])
    if not bare:
        return
    if bare.startswith("/"):
        resolved = os.path.normpath(bare.lstrip("/") or ".")
    else:
        resolved = os.path.normpath(os.path.join(os.path.dirname(path), bare))
    rel = inside(resolved)
    if rel is None:
        report(path, lineno, f"link leaves the repository: {target}")
    elif rel not in present and rel not in dirs:
        report(path, lineno, f"link to a missing file: {target} (resolves to {rel})")

def check_markdown(path, lines):
    fence = None
    for lineno, line in enumerate(lines, 1):
        m = FENCE.match(line)
        if m:
            run = m.group(1)
            if fence is None:
                fence = run
            elif run[0] == fence[0] and len(run) >= len(fence):
                fence = None
            continue
        if fence is not None:
            continue
        text = CODE_SPAN.sub("``", line)
        for rx in (MD_INLINE, MD_REFDEF, HTML_ATTR):
            for m in rx.finditer(text):
                check_link(path, lineno, m.group(1))

def check_paths(path, lines):
    base = os.path.dirname(path)
    for lineno, line in enumerate(lines, 1):
        for bad in FORBIDDEN:
            if bad in line:
                report(path, lineno, f"mentions {bad}, outside the repository")
        if ALLOW in line:
            continue
        for m in UP_PATH.finditer(line):
            token = m.group(1)
            if inside(os.path.normpath(os.path.join(base, token))) is None:
                report(path, lineno, f"path leaves the repository: {token}")

files = 0
for path in tracked:
    if os.path.islink(path):
        files += 1
        dest = os.path.realpath(path)
        if os.path.commonpath([root, dest]) != root:
            report(path, 1, f"symlink leaves the repository: {os.readlink(path)}")
        continue
    if not os.path.isfile(path):
        continue  # deleted in the work tree
    with open(path, "rb") as f:
        data = f.read()
    if b"\0" in data[:8192]:
        continue  # binary
    files += 1
    lines = data.decode("utf-8", "replace").splitlines()
    check_paths(path, lines)
    if path.endswith(".md"):
        check_markdown(path, lines)

problems = sorted(set(problems))
for path, lineno, msg in problems:
    print(f"{path}:{lineno}: {msg}")
if problems:
    print(f"check-self-contained: FAILED, {len(problems)} reference(s) outside "
          f"the repository or to missing files", file=sys.stderr)
    sys.exit(1)
print(f"check-self-contained: ok ({files} files, {links_checked} relative links)")
EOF
