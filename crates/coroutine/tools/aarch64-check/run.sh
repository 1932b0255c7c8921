#!/usr/bin/env bash
# Runs the aarch64 context switch on an x86_64 machine: extracts the exact
# assembly of src/switch/aarch64.rs (`switch` and `trampoline`), links it with
# harness.c (which forges the same first frame as `init_frame`), and runs the
# result under qemu-aarch64. The harness checks that the callee-saved
# registers (general and d8-d15, kept live by -O2 across the switches) and
# FPCR survive on both sides, the entry argument arrives and the stack is
# 16-aligned. Not part of CI; needs Debian's gcc-aarch64-linux-gnu and
# qemu-user (installed here if missing and we are root).
set -euo pipefail
cd "$(dirname "$0")"
if ! command -v aarch64-linux-gnu-gcc >/dev/null || ! command -v qemu-aarch64 >/dev/null; then
    apt-get update -qq && apt-get install -y -qq gcc-aarch64-linux-gnu qemu-user >/dev/null
fi
out=$(mktemp -d)
python3 - "$out/switch.S" <<'PY'
import re, sys
src = open("../../src/switch/aarch64.rs").read()
def body(fn):
    i = src.index("fn " + fn + "(")
    j = src.index("naked_asm!(", i)
    k = src.index("\n    )\n", j)
    return re.findall(r'^\s*"([^"]*)",?', src[j:k], re.M)
out = [".text"]
for fn in ["switch", "trampoline"]:
    out += [f".globl co_{fn}", f".type co_{fn}, %function", f"co_{fn}:"]
    out += ["    " + l for l in body(fn)] + [f".size co_{fn}, .-co_{fn}"]
open(sys.argv[1], "w").write("\n".join(out) + "\n")
PY
aarch64-linux-gnu-gcc -O2 -static harness.c "$out/switch.S" -o "$out/harness"
qemu-aarch64 "$out/harness"
echo "aarch64 switch: ok"
