"""What the OpenCL compiler made of a tuned configuration: instruction counts from its binary.

NVIDIA's OpenCL returns PTX as the program binary; this counts the instructions that decide a
GEMM's speed (shared-memory loads by width, FMAs, global loads by width, local-memory spills)
and writes the binary next to the report. On NVIDIA it also prints ptxas's register and spill
report (the build option -cl-nv-verbose).

    python3 benchmarks/inspect_build.py matmul --size 4096 --device nvidia [--out DIR]
"""

from __future__ import annotations

import argparse
import re
from collections import Counter
from pathlib import Path

import pyopencl as cl

from autotune import device, spec
from autotune.launch import Launch
from autotune.loader import choose

_PATTERNS = {
    "ld.shared.v4": r"\bld\.shared\.v4\.",
    "ld.shared.v2": r"\bld\.shared\.v2\.",
    "ld.shared (scalar)": r"\bld\.shared\.(?:f32|b32|u32|s32)\b",
    "st.shared": r"\bst\.shared\.",
    "fma.rn.f32": r"\bfma\.rn(?:\.ftz)?\.f32\b",  # .ftz under -cl-fast-relaxed-math
    "ld.global.v4": r"\bld\.global\.(?:nc\.)?v4\.",
    "ld.global (scalar)": r"\bld\.global\.(?:nc\.)?(?:f32|b32|u32|s32)\b",
    "st.global": r"\bst\.global\.",
    "bar.sync": r"\bbar\.sync\b",
    "selp (selects)": r"\bselp\.",
    "local (spills)": r"\b(?:ld|st)\.local\.",
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("kernel")
    ap.add_argument("--size", default="")
    ap.add_argument("--device")
    ap.add_argument("--out", default=".")
    args = ap.parse_args()

    from autotune.cli import parse_size

    sp = spec.load(args.kernel)
    problem = sp.resolve_problem(parse_size(args.size, [k.name for k in sp.problem if k.is_size]))
    info, dev = device.select(args.device)
    choice = choose(sp, info, problem)
    launch = Launch(cl.Context([dev]), sp, choice.params, problem, info.facts())
    program = cl.Program(cl.Context([dev]), sp.source).build(options=launch.options)
    binary = program.get_info(cl.program_info.BINARIES)[0]
    text = binary.decode(errors="replace")
    out = Path(args.out) / f"{sp.name}-{info.slug}.ptx"
    out.write_text(text)
    counts = Counter({name: len(re.findall(rx, text)) for name, rx in _PATTERNS.items()})
    regs = re.findall(r"\.reg \.(\w+) \s*%\w+<(\d+)>", text)
    print(f"{sp.name} {problem} on {info.name}: {choice.origin} {choice.params}")
    for name, n in counts.items():
        print(f"  {name:<20} {n}")
    print("  virtual registers   " + ", ".join(f"{t}:{n}" for t, n in regs))
    if "NVIDIA" in dev.platform.name:
        # ptxas's report: the real register count, spills and stack of the kernel(s)
        verbose = cl.Program(cl.Context([dev]), sp.source).build(options=[*launch.options, "-cl-nv-verbose"])
        log = verbose.get_build_info(dev, cl.program_build_info.LOG)
        for line in log.splitlines():
            if "ptxas" in line or "registers" in line or "spill" in line:
                print("  " + line.strip())
    print(f"  binary written to {out}")


if __name__ == "__main__":
    main()
