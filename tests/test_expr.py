from __future__ import annotations

import pytest

from autotune.errors import ExpressionError
from autotune.expr import Expr


def test_arithmetic_comparisons_and_functions():
    e = Expr.parse("max(TS, 8) // WPT ** 2 <= limit and layout == 'row'")
    assert e({"TS": 64, "WPT": 2, "limit": 16, "layout": "row"}) is True
    assert e({"TS": 64, "WPT": 1, "limit": 16, "layout": "row"}) is False
    assert e.names == {"TS", "WPT", "limit", "layout"}


def test_conditional_subscript_and_chained_compare():
    assert Expr.parse("a[1] if 0 < b < 3 else -1")({"a": (5, 6), "b": 2}) == 6
    assert Expr.parse("is_pow2(x) and not x % 4")({"x": 16}) is True


@pytest.mark.parametrize("source", [
    "__import__('os')", "x.__class__", "open('f')", "[i for i in x]", "lambda: 1", "x = 1",
])
def test_rejects_anything_beyond_arithmetic(source):
    with pytest.raises(ExpressionError):
        Expr.parse(source)


def test_syntax_error_names_the_expression():
    with pytest.raises(ExpressionError, match="not a valid expression"):
        Expr.parse("TS %% 2")


def test_unknown_name_and_huge_exponent_are_reported():
    with pytest.raises(ExpressionError, match="unknown name 'Q'"):
        Expr.parse("Q + 1")({})
    with pytest.raises(ExpressionError, match="too large"):
        Expr.parse("2 ** 10 ** 9")({})
    with pytest.raises(ExpressionError, match="unknown name"):
        Expr.parse("A + B").check_names({"A"}, "where")
