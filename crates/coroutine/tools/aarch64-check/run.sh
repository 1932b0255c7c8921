#!/usr/bin/env bash
# Runs the aarch64 context switch on an x86_64 machine: extracts the exact
# assembly of src/switch/aarch64.rs (`switch` and `trampoline`), links it with
# harness.c (which forges the same first frame as `init_frame`), and runs the
# result under qemu-aarch64. The harness checks that the callee-saved
# registers (general and d8-d15, kept live by -O2 across the switches) and
# FPCR survive on both sides, the entry argument arrives and the stack is
# 16-aligned, for the default build and for the `fp-state` one. Not part of CI; needs Debian's gcc-aarch64-linux-gnu and
# qemu-user (installed here if missing and we are root).
set -euo pipefail
cd "$(dirname "$0")"
if ! command -v aarch64-linux-gnu-gcc >/dev/null || ! command -v qemu-aarch64 >/dev/null; then
    apt-get update -qq && apt-get install -y -qq gcc-aarch64-linux-gnu qemu-user >/dev/null
fi
out=$(mktemp -d)
# Once as the default build (no FPCR), once as with the `fp-state` feature.
for variant in default fp-state; do
python3 - "$out/switch-$variant.S" "$variant" <<'PY'
import re, sys
src = open("../../src/switch/aarch64.rs").read()
fp = sys.argv[2] == "fp-state"
# The fp-state definitions of the FPCR macros, as lists of instructions.
macros = {}
for name, text in re.findall(
        r'#\[cfg\(feature = "fp-state"\)\]\s*macro_rules! (\w+) \{\s*\(\) => \{\s*"([^"]*)"', src):
    macros[name] = text.split("\\n")
def body(fn):
    i = src.index("fn " + fn + "(")
    j = src.index("naked_asm!(", i)
    k = src.index("\n    )\n", j)
    lines = []
    for m in re.finditer(r'^\s*(?:"([^"]*)"|(\w+)!\(\)),?', src[j:k], re.M):
        if m.group(1) is not None:
            lines.append(m.group(1))
        elif fp:
            lines += macros[m.group(2)]
    return lines
out = [".text"]
for fn in ["switch", "trampoline"]:
    out += [f".globl co_{fn}", f".type co_{fn}, %function", f"co_{fn}:"]
    out += ["    " + l for l in body(fn)] + [f".size co_{fn}, .-co_{fn}"]
open(sys.argv[1], "w").write("\n".join(out) + "\n")
PY
flag=""
[ "$variant" = fp-state ] && flag=-DFP_STATE
echo "$variant: $(grep -c fpcr "$out/switch-$variant.S" || true) FPCR instructions in the switch"
aarch64-linux-gnu-gcc -O2 -static $flag harness.c "$out/switch-$variant.S" -o "$out/harness-$variant"
qemu-aarch64 "$out/harness-$variant"
echo "aarch64 switch ($variant): ok"
done
