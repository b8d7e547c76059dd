from __future__ import annotations

import pytest

from autotune.cli import parse_size
from autotune.errors import ProblemError

KEYS = ["M", "N", "K"]


def test_size_forms():
    assert parse_size("512", KEYS) == {"M": "512", "N": "512", "K": "512"}
    assert parse_size("64x32x16", KEYS) == {"M": "64", "N": "32", "K": "16"}
    assert parse_size("M=8,layout=col", KEYS) == {"M": "8", "layout": "col"}


@pytest.mark.parametrize("bad", ["abc", "64x32", "1.5", "-3"])
def test_bad_sizes_say_how_to_write_them(bad):
    with pytest.raises(ProblemError, match="--size"):
        parse_size(bad, KEYS)
