"""Merge the entries of one profile into another with the usual rules (a better or newer-spec
entry replaces, a tuned one replaces a pick): how profiles tuned on a GPU host come home.

    python3 benchmarks/merge_profile.py FROM.yaml profiles/nvidia-corporation-h200.yaml
"""

from __future__ import annotations

import sys
from pathlib import Path

from autotune import profiles


def main(source: str, target: str) -> int:
    doc = profiles.read(Path(source))
    for kernel in doc.get("kernels") or {}:
        for entry in profiles.entries(doc, kernel, source):
            verdict = profiles.save(entry, kernel, doc.get("device") or {}, Path(target))
            print(f"{kernel} {dict(entry.problem)}: {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
