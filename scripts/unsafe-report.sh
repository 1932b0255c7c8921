#!/usr/bin/env bash
# Counts the `unsafe` code of every crate (comments and string/char literals
# stripped first, so prose and test strings do not count) and checks that the
# lint `clippy::undocumented_unsafe_blocks = "deny"` reaches each of them:
# the workspace sets it in [workspace.lints.clippy] and a crate inherits it
# only if its Cargo.toml says `[lints] workspace = true`. A crate outside the
# workspace (fuzz/) is covered by a `[lints.clippy]` table of its own.
#
# Per crate it prints `unsafe { }` blocks (split into library code under src/
# and tests/examples/benches), `unsafe fn`, `unsafe impl`, `unsafe extern`
# blocks and `#[unsafe(...)]` attributes. Exits non-zero if a crate that has
# unsafe code is not covered by the lint.
#
# It also lists every safe `pub fn` (`async`, `const` or not) in the
# library sources (`src/`) of the runtime crates (reactor, proactor,
# executor, coroutine, dispatch, pool) that takes a raw fd (`RawFd`, or a
# `c_int`/`i32` named like an fd) or a raw pointer: such a function lets
# safe code hand the kernel an fd it does not own (a number that may have
# been closed and reused by another owner) or memory it does not have.
# Each must be an `unsafe fn` with a contract, take `BorrowedFd`/`OwnedFd`
# (or `&impl AsFd`), or be crate-private (`pub(crate)`); any listed one is
# a problem. The few that are allowed are named in ALLOWED below, each
# with the reason.
#
# Usage: scripts/unsafe-report.sh
set -euo pipefail
cd "$(dirname "$0")/.."
exec python3 - <<'EOF'
import itertools, os, re, sys

def strip(src):
    """Source with comments and string/char literals blanked out."""
    out, i, n = [], 0, len(src)
    while i < n:
        c = src[i]
        if src.startswith("//", i):
            j = src.find("\n", i)
            i = n if j < 0 else j
        elif src.startswith("/*", i):
            depth, i = 1, i + 2
            while i < n and depth:
                if src.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif src.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    i += 1
        elif (m := re.compile(r'b?r(#*)"').match(src, i)) and (i == 0 or not (src[i-1].isalnum() or src[i-1] == "_")):
            end = '"' + m.group(1)
            j = src.find(end, m.end())
            i = n if j < 0 else j + len(end)
            out.append('""')
        elif c == '"' or (c == "b" and src.startswith('b"', i) and (i == 0 or not (src[i-1].isalnum() or src[i-1] == "_"))):
            i = i + 1 if c == '"' else i + 2
            while i < n and src[i] != '"':
                i += 2 if src[i] == "\\" else 1
            i += 1
            out.append('""')
        elif c == "'":
            # A char literal ('a', '\n', '\u{..}') or a lifetime ('a).
            m = re.compile(r"'(\\.[^']*|[^'\\])'").match(src, i)
            if m:
                i = m.end()
                out.append("' '")
            else:
                out.append(c)
                i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)

PATTERNS = {
    "blocks": re.compile(r"\bunsafe\s*\{"),
    # (String literals are blanked to "" by strip.)
    "fn": re.compile(r'\bunsafe\s+(?:extern\s*(?:""\s*)?)?fn\b'),
    "impl": re.compile(r"\bunsafe\s+impl\b"),
    "extern": re.compile(r'\bunsafe\s+extern\s*(?:""\s*)?\{'),
    "attr": re.compile(r"#\[\s*unsafe\s*\("),
}

def crates():
    """(name, dir, manifest) of every Cargo package in the repository."""
    found = []
    for root, dirs, files in os.walk("."):
        dirs[:] = [d for d in dirs if d not in ("target", ".git", "node_modules")]
        if "Cargo.toml" in files:
            text = open(os.path.join(root, "Cargo.toml")).read()
            m = re.search(r'^\[package\][^\[]*?^name\s*=\s*"([^"]+)"', text, re.M | re.S)
            if m:
                found.append((m.group(1), root[2:] or ".", text))
    return sorted(found, key=lambda c: c[1])

def inherits_lints(manifest):
    return re.search(r"^\[lints\]\s*\n(?:[^\[]*\n)?\s*workspace\s*=\s*true", manifest, re.M) is not None

root_toml = open("Cargo.toml").read()
lint_on = re.search(r'^\[workspace\.lints\.clippy\][^\[]*undocumented_unsafe_blocks\s*=\s*"deny"',
                    root_toml, re.M | re.S) is not None
m = re.search(r"^exclude\s*=\s*\[([^\]]*)\]", root_toml, re.M)
excluded = re.findall(r'"([^"]+)"', m.group(1)) if m else []

all_crates = crates()
dirs = [d for _, d, _ in all_crates]
rows, problems = [], []
totals = {k: 0 for k in ("src", "other", "fn", "impl", "extern", "attr")}
for name, d, manifest in all_crates:
    counts = {k: 0 for k in totals}
    # Targets kept outside the package directory (bin/httplite's [[test]] is tests/server/main.rs).
    outside = set()
    for p in re.findall(r'^path\s*=\s*"([^"]+)"', manifest, re.M):
        full = os.path.normpath(os.path.join(d, p))
        if not full.startswith(os.path.normpath(d) + os.sep):
            outside.add(os.path.dirname(full))
    walks = itertools.chain.from_iterable(os.walk(top) for top in [d, *sorted(outside)])
    for root, subdirs, files in walks:
        # A nested package is counted on its own.
        subdirs[:] = [s for s in subdirs if s not in ("target",)
                      and os.path.normpath(os.path.join(root, s)) not in dirs]
        for f in files:
            if not f.endswith(".rs"):
                continue
            path = os.path.join(root, f)
            code = strip(open(path, encoding="utf-8").read())
            rel = os.path.relpath(path, d)
            where = "src" if rel.startswith("src" + os.sep) else "other"
            counts[where] += len(PATTERNS["blocks"].findall(code))
            for k in ("fn", "impl", "extern", "attr"):
                counts[k] += len(PATTERNS[k].findall(code))
    in_workspace = d != "." and not any(d == e or d.startswith(e + "/") for e in excluded)
    is_root_ws = "[workspace]" in manifest and d != "."
    own_lint = re.search(r'^\[lints\.clippy\][^\[]*undocumented_unsafe_blocks\s*=\s*"deny"',
                         manifest, re.M) is not None
    covered = own_lint or (inherits_lints(manifest) and lint_on and in_workspace and not is_root_ws)
    note = ("lint: yes (own [lints])" if own_lint else "lint: yes") if covered else (
        "lint: NO (own workspace)" if (is_root_ws or not in_workspace) else "lint: NO")
    has_unsafe = counts["src"] + counts["other"] + counts["fn"] + counts["impl"] + counts["extern"] > 0
    if not covered and has_unsafe:
        problems.append(f"{name} ({d}) has unsafe code but is not covered by the lint")
    for k in totals:
        totals[k] += counts[k]
    rows.append((name, d, counts, note))

print(f"workspace lint clippy::undocumented_unsafe_blocks = \"deny\": {'set' if lint_on else 'NOT SET'}")
hdr = f"{'crate':<18} {'dir':<16} {'blocks src/':>11} {'blocks tests etc':>16} {'unsafe fn':>9} {'impl':>5} {'extern':>6} {'#[unsafe]':>9}  lint"
print(hdr)
print("-" * len(hdr))
for name, d, c, note in rows:
    print(f"{name:<18} {d:<16} {c['src']:>11} {c['other']:>16} {c['fn']:>9} {c['impl']:>5} {c['extern']:>6} {c['attr']:>9}  {note}")
print("-" * len(hdr))
print(f"{'total':<35} {totals['src']:>11} {totals['other']:>16} {totals['fn']:>9} {totals['impl']:>5} {totals['extern']:>6} {totals['attr']:>9}")
# The runtime crates: everything between the kernel and a request handler.
RUNTIME = ("reactor", "proactor", "executor", "coroutine", "dispatch", "pool")
# A safe `pub fn` (not `pub(crate)`, not `unsafe`), up to its name.
PUB_FN = re.compile(r'\bpub\s+(?:const\s+)?(?:async\s+)?(unsafe\s+)?(?:extern\s*(?:""\s*)?)?fn\s+(\w+)')
RAW_TYPE = re.compile(r"\bRawFd\b|\*\s*(?:const|mut)\b")
INT_TYPE = re.compile(r"^(?:(?:std::(?:os::raw|ffi)|libc|core::ffi)::)?(?:c_int|i32)$")
FD_NAME = re.compile(r"(?:^|_)e?fds?(?:_|$)")
# Allowed, with why. Keyed by (crate, function name).
ALLOWED = {
    # The timeline's flow ids of handed-off connections are kept in a table
    # indexed by fd number: pure bookkeeping, the number never reaches the
    # kernel. Callers pass the number of a connection they may not hold as
    # an fd at all (the threaded driver's transports, test doubles with -1).
    ("reactor", "handoff_flow"): "fd number as a table key only",
    ("reactor", "fd_flow"): "fd number as a table key only",
    ("reactor", "take_fd_flow"): "fd number as a table key only",
}

def balanced(code, i, open_, close):
    """Index just past the bracket group that starts at code[i] (== open_)."""
    depth = 0
    while i < len(code):
        if code.startswith("->", i):
            i += 2
            continue
        c = code[i]
        if c == open_:
            depth += 1
        elif c == close:
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return i

def params(text):
    """The top-level, comma-separated parameters of a parameter list."""
    out, depth, cur, i = [], 0, "", 0
    while i < len(text):
        if text.startswith("->", i):
            cur += "->"
            i += 2
            continue
        c = text[i]
        depth += {"(": 1, "[": 1, "<": 1, ")": -1, "]": -1, ">": -1}.get(c, 0)
        if c == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += c
        i += 1
    if cur.strip():
        out.append(cur.strip())
    return out

def raw_param(p):
    """Whether a parameter (`name: Type`) is a raw fd or a raw pointer."""
    if ":" not in p:
        return False  # self, &self, &mut self
    name, ty = (x.strip() for x in p.split(":", 1))
    name = re.sub(r"^mut\s+", "", name)
    ty = " ".join(ty.split())
    return bool(RAW_TYPE.search(ty) or (INT_TYPE.match(ty) and FD_NAME.search(name)))

raw_fns, allowed = [], []
for name, d, _ in all_crates:
    if name not in RUNTIME:
        continue
    for root, _, files in sorted(os.walk(os.path.join(d, "src"))):
        for f in sorted(files):
            if not f.endswith(".rs"):
                continue
            path = os.path.join(root, f)
            code = strip(open(path, encoding="utf-8").read())
            for m in PUB_FN.finditer(code):
                if m.group(1):
                    continue  # an unsafe fn: its contract is the caller's
                i = m.end()
                while i < len(code) and code[i].isspace():
                    i += 1
                if code.startswith("<", i):
                    i = balanced(code, i, "<", ">")
                    while i < len(code) and code[i].isspace():
                        i += 1
                if not code.startswith("(", i):
                    continue
                end = balanced(code, i, "(", ")")
                bad = [p for p in params(code[i + 1:end - 1]) if raw_param(p)]
                if not bad:
                    continue
                line = code.count("\n", 0, m.start()) + 1
                entry = f"{path}:{line}: {' '.join(m.group(0).split())}({', '.join(bad)})"
                if (name, m.group(2)) in ALLOWED:
                    allowed.append(f"{entry}  [allowed: {ALLOWED[(name, m.group(2))]}]")
                else:
                    raw_fns.append(entry)
print()
print(f"safe pub fns of the runtime crates taking a raw fd or pointer: {len(raw_fns)}"
      f" (and {len(allowed)} allowed)")
for f in allowed:
    print("  " + f)
for f in raw_fns:
    print("  " + f)
    problems.append(f"{f} is safe and takes a raw fd or pointer")
print(f"problems: {len(problems)}")
for p in problems:
    print("PROBLEM:", p)
sys.exit(1 if problems or not lint_on else 0)
EOF
