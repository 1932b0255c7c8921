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
# It also lists every safe `pub fn` of a public syscall layer (a crate's
# `pub mod sys`) that takes a raw fd or a raw pointer: such a function lets
# safe code hand the kernel an fd it does not own or memory it does not
# have. Each must be an `unsafe fn` with a contract, take `BorrowedFd` or
# `OwnedFd`, or be crate-private; any listed one is a problem.
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
RAW_PARAM = re.compile(r"\bRawFd\b|\*\s*(?:const|mut)\b|\bc_int\b")
PUB_FN = re.compile(r"\bpub\s+fn\s+(\w+)\s*(?:<[^>{]*>)?\s*\(")
raw_fns = []
for name, d, _ in all_crates:
    lib = os.path.join(d, "src", "lib.rs")
    if not os.path.exists(lib) or not re.search(r"^\s*pub\s+mod\s+sys\s*;", strip(open(lib).read()), re.M):
        continue
    path = next((p for p in (os.path.join(d, "src", "sys.rs"), os.path.join(d, "src", "sys", "mod.rs"))
                 if os.path.exists(p)), None)
    if path is None:
        continue
    code = strip(open(path, encoding="utf-8").read())
    for m in PUB_FN.finditer(code):
        depth, i = 1, m.end()
        while depth and i < len(code):
            depth += {"(": 1, ")": -1}.get(code[i], 0)
            i += 1
        if RAW_PARAM.search(code[m.end():i - 1]):
            line = code.count("\n", 0, m.start()) + 1
            raw_fns.append(f"{path}:{line}: pub fn {m.group(1)}")
print()
print("safe pub fns of public sys modules taking a raw fd or pointer:", len(raw_fns))
for f in raw_fns:
    print("  " + f)
    problems.append(f"{f} is safe and takes a raw fd or pointer")
for p in problems:
    print("PROBLEM:", p)
sys.exit(1 if problems or not lint_on else 0)
EOF
