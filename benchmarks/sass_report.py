"""What the GPU runs: assemble a PTX file from inspect_build.py to SASS and summarise its loops.

NVIDIA's OpenCL driver hands back PTX; ptxas turns it into the machine code (SASS) the GPU
runs, and only the SASS shows what is left of the source's loops: how many FFMAs per load,
register moves, spills. This needs no GPU, only NVIDIA's assembler and disassembler from PyPI:

    pip install nvidia-cuda-nvcc nvidia-cuda-nvdisasm
    python3 benchmarks/sass_report.py benchmarks/correlate-nvidia-corporation-h200.ptx [--arch sm_90]

For each kernel it prints ptxas's register and spill report, then the basic blocks that hold
most of the code (the unrolled loops) with their instruction mix and FFMA share.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path


def tool(name: str) -> str:
    """Path of ``name`` from the nvidia-cuda-* wheels."""
    try:
        import nvidia  # type: ignore[import-not-found]
    except ImportError:
        sys.exit("needs NVIDIA's tools: pip install nvidia-cuda-nvcc nvidia-cuda-nvdisasm")
    for root in nvidia.__path__:
        for path in Path(root).glob(f"*/bin/{name}"):
            return str(path)
    sys.exit(f"{name} not found in the nvidia-cuda-* packages; pip install nvidia-cuda-nvcc nvidia-cuda-nvdisasm")


def blocks(sass: str, kernel: str) -> list[tuple[str, list[str]]]:
    """The kernel's basic blocks as (label, opcodes), in code order."""
    text = sass[sass.find(f"\n{kernel}:"):]
    nxt = re.search(r"\n\s+\.section\s", text[1:])  # the next function's section
    text = text[: nxt.start() + 1] if nxt else text
    out: list[tuple[str, list[str]]] = [(kernel, [])]
    for line in text.splitlines()[1:]:
        label = re.match(r"^(\.L_x_\d+):", line)
        if label:
            out.append((label.group(1), []))
            continue
        ins = re.match(r"\s+/\*[0-9a-f]{4,}\*/\s+(.*?)\s*;", line)
        if ins:
            op = re.sub(r"^@!?U?P\w+\s+", "", ins.group(1)).split()[0]
            out[-1][1].append(op.split(".")[0])
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("ptx", type=Path)
    ap.add_argument("--arch", default="sm_90", help="GPU architecture (sm_90: H100/H200)")
    ap.add_argument("--top", type=int, default=3, help="blocks to show per kernel")
    args = ap.parse_args()
    text = args.ptx.read_text(errors="replace")
    # the driver appends OpenCL metadata (and a NUL) that ptxas does not read
    text = text.split(".metadata_section")[0].rstrip("\0")
    with tempfile.TemporaryDirectory() as tmp:
        ptx, cubin = Path(tmp) / "k.ptx", Path(tmp) / "k.cubin"
        ptx.write_text(text)
        asm = subprocess.run([tool("ptxas"), f"-arch={args.arch}", "-O3", "-v", str(ptx), "-o", str(cubin)],
                             capture_output=True, text=True)
        if asm.returncode:
            sys.exit(asm.stderr)
        sass = subprocess.run([tool("nvdisasm"), "-c", str(cubin)], capture_output=True, text=True,
                              check=True).stdout
    for line in asm.stderr.splitlines():
        if "Compiling" in line or "registers" in line or "spill" in line:
            print(line.replace("ptxas info    : ", "").strip())
    for kernel in re.findall(r"^\.entry (\w+)\(", text, re.MULTILINE):
        found = sorted(blocks(sass, kernel), key=lambda b: -len(b[1]))[: args.top]
        print(f"\n{kernel}: largest blocks (instructions, FFMA share, mix)")
        for label, ops in found:
            mix = Counter(ops)
            share = mix["FFMA"] / len(ops) if ops else 0.0
            top = ", ".join(f"{op} {n}" for op, n in mix.most_common(8))
            print(f"  {label:<10} {len(ops):>5}  {share:5.1%}  {top}")


if __name__ == "__main__":
    main()
