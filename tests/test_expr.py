from __future__ import annotations

import re

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


def test_is_is_named_as_the_operator_refused():
    """Trial 45: `x is None` was refused as "Compare is not allowed", comparisons being allowed."""
    with pytest.raises(ExpressionError, match=r"the operator 'is' \(use == or !=\) is not allowed"):
        Expr.parse("WG is None")
    with pytest.raises(ExpressionError, match=r"the operator 'is not' \(use == or !=\)"):
        Expr.parse("WG == 1 is not 3")


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


# A child process runs the sources that hang or exhaust memory without the size checks, so that a
# regression fails on its timeout instead of hanging the suite. It imports only autotune.expr (the
# package's __init__ registers OpenCL runtimes, which takes longer than the check itself).
_ISOLATED = """
import resource, sys, types
resource.setrlimit(resource.RLIMIT_AS, (2**30, 2**30))
package = types.ModuleType("autotune")
package.__path__ = [sys.argv[1]]
sys.modules["autotune"] = package
from autotune.expr import Expr
try:
    print("value", Expr.parse(sys.argv[2])({}))
except Exception as exc:
    print(type(exc).__name__, exc)
"""


@pytest.mark.parametrize("source", ["(((10**128)**128)**128)**128", "1 << 10**10"])
def test_nested_powers_and_huge_shifts_are_refused_before_they_are_computed(source):
    import subprocess
    import sys
    import time
    from pathlib import Path

    import autotune.expr

    start = time.monotonic()
    try:
        done = subprocess.run([sys.executable, "-c", _ISOLATED, str(Path(autotune.expr.__file__).parent), source],
                              capture_output=True, text=True, timeout=5)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{source} still ran after 5 s")
    assert done.stdout.startswith(f"ExpressionError {source!r}: ") and "exceeds 4096 bits" in done.stdout, \
        done.stdout + done.stderr
    assert time.monotonic() - start < 2


@pytest.mark.parametrize("source", ["(10**128)**128", "1 << 4096", "x * x * x", "int(1e308) ** 5", "x << 2100"])
def test_every_integer_result_is_capped_at_4096_bits(source):
    with pytest.raises(ExpressionError, match=r"exceeds 4096 bits; use smaller numbers$") as info:
        Expr.parse(source)({"x": 2**2000})
    assert str(info.value).startswith(repr(source))
    assert Expr.parse("1 << 4095")({}) == 2**4095, "a 4096-bit result is still allowed"


@pytest.mark.parametrize(("source", "problem"), [
    ("-" * 100_000 + "1", "too long (100001 characters, limit 2000)"),
    ("1+" * 50_000 + "1", "too long (100001 characters, limit 2000)"),
    ("-" * 60 + "1", "nested too deeply (more than 50 levels)"),
    ("1+" * 60 + "1", "nested too deeply (more than 50 levels)"),
], ids=["100000 minus signs", "50000 additions", "60 minus signs", "60 additions"])
def test_overlong_and_deeply_nested_sources_are_refused_at_parse_time(source, problem):
    with pytest.raises(ExpressionError, match=re.escape(problem)) as info:
        Expr.parse(source)
    message = str(info.value)
    assert "\n" not in message and len(message) < 200 and message.startswith(repr(source[:59] + "…"))
    assert Expr.parse("-" * 40 + "1")({}) == 1 and Expr.parse("+".join(["x"] * 40))({"x": 1}) == 40


def test_out_of_range_subscript_names_the_expression():
    with pytest.raises(ExpressionError, match=re.escape(
            "'max_work_item_sizes[9]': index 9 is out of range for max_work_item_sizes, which has 3 item(s)")):
        Expr.parse("max_work_item_sizes[9]")({"max_work_item_sizes": (1024, 1024, 64)})
    assert Expr.parse("max_work_item_sizes[2]")({"max_work_item_sizes": (1024, 1024, 64)}) == 64


@pytest.mark.parametrize("error", [RecursionError, MemoryError, IndexError])
def test_recursion_memory_and_index_errors_inside_an_expression_become_expression_errors(error):
    class Failing:
        def __add__(self, other):
            raise error("boom")

    with pytest.raises(ExpressionError, match=r"^'x \+ 1': boom$"):
        Expr.parse("x + 1")({"x": Failing()})


@pytest.mark.parametrize("source", ["'ab' * 5000", "'%09999d' % 1"])
def test_strings_cannot_grow_without_bound(source):
    with pytest.raises(ExpressionError, match=re.escape(repr(source))):
        Expr.parse(source)({})


def test_a_flag_of_0_or_1_named_alone_is_a_condition_and_other_numbers_are_not():
    """Trial 113: Kernel Tuner's `use_local or not use_padding`, flags of 0 and 1, was refused
    while `not use_padding or use_local == 1` was taken."""
    from autotune.errors import ConditionError

    flags = Expr.parse("use_local or not use_padding").as_condition()
    truth = [bool(flags({"use_local": a, "use_padding": b})) for a in (0, 1) for b in (0, 1)]
    assert truth == [True, False, True, True]
    assert Expr.parse("use_local").as_condition()({"use_local": 1})
    with pytest.raises(ConditionError, match="'N % WG' gives 0, not true or false"):  # meant as == 0
        Expr.parse("N % WG").as_condition()({"N": 64, "WG": 16})
    with pytest.raises(ConditionError, match="its part 'WG' gives 16, not true or false"):
        Expr.parse("N > 0 and WG").as_condition()({"N": 64, "WG": 16})
