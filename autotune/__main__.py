"""``python -m autotune``: the same as the ``autotune`` command."""

from __future__ import annotations

import sys

from .cli import console

if __name__ == "__main__":
    sys.exit(console())
