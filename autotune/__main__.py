"""``python -m autotune``: the same as the ``autotune`` command."""

from __future__ import annotations

import sys

from ._entry import main

if __name__ == "__main__":
    sys.exit(main())
