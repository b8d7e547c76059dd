"""Locate the data shipped with autotune: kernel templates, search spaces, tuned profiles.

In a source checkout (and an editable install) they are the top-level folders of the
repository; a regular install puts them under ``autotune/_data/`` (see pyproject.toml).
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent


@cache
def data_dir(name: str) -> Path:
    """The folder ``name`` (``kernel_templates``, ``search_spaces`` or ``profiles``).

    Example:
        >>> (data_dir("search_spaces") / "matmul.yaml").is_file()
        True
    """
    for candidate in (_PACKAGE / "_data" / name, _PACKAGE.parent / name):
        if candidate.is_dir():
            return candidate
    return _PACKAGE / "_data" / name  # absent: callers see an empty folder
