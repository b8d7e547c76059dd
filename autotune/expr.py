"""Restricted arithmetic expressions for constraints, launch geometry and metrics.

Expressions are parsed with :mod:`ast`, checked against a whitelist of node types and
functions, and compiled into nested Python closures: no ``eval``, no attribute access, no
names other than the variables given at evaluation time.

Example:
    >>> e = Expr.parse("TS % WPT == 0 and (TS // WPT) ** 2 <= max_work_group_size")
    >>> sorted(e.names)
    ['TS', 'WPT', 'max_work_group_size']
    >>> e({"TS": 32, "WPT": 4, "max_work_group_size": 256})
    True
"""

from __future__ import annotations

import ast
import math
import numbers
import operator
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from .errors import ConditionError, ExpressionError, clipped

Env = Mapping[str, Any]
_Fn = Callable[[Env], Any]

_BINOPS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
    ast.BitAnd: operator.and_,
    ast.BitOr: operator.or_,
    ast.BitXor: operator.xor,
    ast.LShift: operator.lshift,
    ast.RShift: operator.rshift,
}
_CMPOPS: dict[type, Callable[[Any, Any], bool]] = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.In: lambda a, b: a in b,
    ast.NotIn: lambda a, b: a not in b,
}
_UNARY: dict[type, Callable[[Any], Any]] = {
    ast.USub: operator.neg,
    ast.UAdd: operator.pos,
    ast.Not: operator.not_,
}
FUNCTIONS: dict[str, Callable[..., Any]] = {
    "min": min,
    "max": max,
    "abs": abs,
    "int": int,
    "sqrt": math.sqrt,
    "log2": math.log2,
    "ceil": math.ceil,
    "floor": math.floor,
    "is_pow2": lambda x: x > 0 and (x & (x - 1)) == 0,
}
_MAX_EXPONENT = 128  # keeps ``2 ** 10 ** 9`` from hanging the tuner
# Bounds that keep a hostile or mistaken spec from hanging the tuner or exhausting memory: no
# real constraint, launch size or metric comes near them.
MAX_SOURCE = 2000  # characters of expression text
MAX_DEPTH = 50  # nesting of the syntax tree (the compiler and the closures recurse on it)
MAX_INT_BITS = 4096  # size of any integer value, constant or intermediate
MAX_ITEMS = 4096  # length of a string or tuple built by ``+`` or ``*``


def _too_big(what: str) -> ExpressionError:
    return ExpressionError(f"{what} exceeds {MAX_INT_BITS} bits; use smaller numbers")


def _pow(a: Any, b: Any) -> Any:
    if isinstance(b, (int, float)) and abs(b) > _MAX_EXPONENT:
        raise ExpressionError(f"exponent {b} is too large (limit {_MAX_EXPONENT})")
    # a lower bound of the result's size, checked before the (possibly slow) power is taken
    if isinstance(a, int) and isinstance(b, int) and b > 0 and (abs(a).bit_length() - 1) * b >= MAX_INT_BITS:
        raise _too_big(f"raising a {a.bit_length()}-bit number to the power {b}")
    return operator.pow(a, b)


def _lshift(a: Any, b: Any) -> Any:
    if isinstance(a, int) and isinstance(b, int) and a and b > 0 and a.bit_length() + b > MAX_INT_BITS:
        raise _too_big(f"shifting a {a.bit_length()}-bit number left by {b}")
    return operator.lshift(a, b)


def _mul(a: Any, b: Any) -> Any:
    # repetition of a string or tuple is checked before the copy is made
    for seq, n in ((a, b), (b, a)):
        if isinstance(seq, (str, tuple)) and isinstance(n, int) and len(seq) * n > MAX_ITEMS:
            raise ExpressionError(f"repeating {len(seq)} item(s) {n} times exceeds {MAX_ITEMS} items; use fewer")
    return operator.mul(a, b)


def _mod(a: Any, b: Any) -> Any:
    # ``'%0999999999d' % 1`` would build a gigabyte string; no expression needs printf formatting
    if isinstance(a, str):
        raise ExpressionError("'%' on a string formats it, which expressions do not support; use '==' or 'in'")
    return operator.mod(a, b)


def _bounded(value: Any) -> Any:
    """``value``, if it is within the size limits."""
    if isinstance(value, int) and value.bit_length() > MAX_INT_BITS:
        raise _too_big(f"a {value.bit_length()}-bit result")
    if isinstance(value, (str, tuple)) and len(value) > MAX_ITEMS:
        raise ExpressionError(f"a result of {len(value)} items exceeds {MAX_ITEMS} items; build shorter ones")
    return value


_GUARDED: dict[type, Callable[[Any, Any], Any]] = {
    ast.Pow: _pow,
    ast.LShift: _lshift,
    ast.Mult: _mul,
    ast.Mod: _mod,
}
#: What ``Expr.__call__`` reports as a failure of the expression rather than a bug.
_EVAL_ERRORS = (ArithmeticError, TypeError, ValueError, LookupError, RecursionError, MemoryError)


@dataclass(frozen=True)
class Expr:
    """A parsed, whitelisted expression; call it with a mapping of variable values."""

    source: str
    names: frozenset[str]
    _fn: _Fn = field(repr=False, compare=False)
    #: it must give true or false (a constraint: trial 36's 'WGX * WGY' ruled nothing out)
    condition: bool = False
    #: the names a condition takes as true or false by themselves (`F or not P`): flags of 0 or 1
    flags: frozenset[str] = frozenset()

    @classmethod
    def parse(cls, source: str | float | bool, conditions: bool = False) -> Expr:
        """Parse ``source``; numbers are accepted as constant expressions. ``conditions``: each
        operand of ``and``/``or`` must give true or false (see :meth:`as_condition`)."""
        if isinstance(source, bool) or isinstance(source, (int, float)):
            value = source
            if isinstance(value, int) and value.bit_length() > MAX_INT_BITS:
                raise _too_big(f"the {value.bit_length()}-bit constant {_brief(str(value))}")
            return cls(str(source), frozenset(), lambda env: value)
        if not isinstance(source, str) or not source.strip():
            raise ExpressionError(f"expected an expression string, got {source!r}")
        if len(source) > MAX_SOURCE:
            raise ExpressionError(
                f"{_brief(source)} is too long ({len(source)} characters, limit {MAX_SOURCE}); "
                "simplify it or split it into derived values"
            )
        try:
            tree = ast.parse(source.strip(), mode="eval")
        except SyntaxError as exc:
            c_like = "; write and, or, not" if re.search(r"&&|\|\||!(?!=)", source) else ""  # trial 52
            if re.search(r"(?<![=!<>])=(?![=<>])", source):  # trial 80: `ALGO = 'vec'` (trial 84: not `=>`)
                c_like += "; compare with == (a single = assigns)"
            raise ExpressionError(f"{source!r} is not a valid expression ({exc.msg}{c_like})") from None
        except (ValueError, RecursionError, MemoryError) as exc:  # null bytes, parser limits
            raise ExpressionError(f"{source!r} is not a valid expression ({_one_line(exc)})") from None
        _check_depth(tree.body, source)
        names: set[str] = set()
        fn = _compile(tree.body, source, names, conditions)
        return cls(source, frozenset(names), fn)

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        # the compiled closure does not pickle; the source re-parses to the same expression
        # (a spec travels to the measuring worker this way)
        return (_reparse, (self.source, self.names, self.condition))

    def as_condition(self) -> Expr:
        """This expression, raising ConditionError where it, or an operand of its ``and`` and
        ``or``, gives anything but true or false (trial 40: ``WPT == 1 or WG`` passed)."""
        if not self.names:
            return replace(self, condition=True)
        flags = frozenset(_flags(ast.parse(self.source.strip(), mode="eval").body))
        return replace(Expr.parse(self.source, conditions=True), condition=True, flags=flags)

    def __call__(self, env: Env) -> Any:
        try:
            value = self._fn(env)
        except ConditionError as exc:  # an operand's, said with this expression
            raise ConditionError(f"{self.source!r}: {exc}") from None
        except ExpressionError as exc:  # a size limit or a bad subscript, raised by the closures
            raise ExpressionError(f"{self.source!r}: {exc}") from None
        except KeyError as exc:  # subscripts raise their own errors: a KeyError is a missing name
            raise ExpressionError(f"{self.source!r}: unknown name {exc.args[0]!r}") from None
        except _EVAL_ERRORS as exc:
            raise ExpressionError(f"{self.source!r}: {_one_line(exc)}") from None
        if self.condition and not is_truth(value, self.source):
            raise ConditionError(f"{self.source!r} gives {_brief(repr(value))[1:-1]}, not true or false; write a "
                                 "condition, such as a comparison")
        return value

    def check_names(self, known: set[str] | frozenset[str], where: str,
                    hint: Callable[[str], str] = lambda name: "") -> None:
        """Raise if the expression uses a name outside ``known``; ``where`` locates it, and
        ``hint`` says why a name is not known there (empty: nothing to add)."""
        unknown = sorted(self.names - set(known))
        if unknown:
            hints = "; ".join(h for n in unknown if (h := hint(n)))
            raise ExpressionError(
                f"{where}: {self.source!r} uses unknown name(s) {', '.join(unknown)}"
                + (f" ({hints})" if hints else "")
                + f"; known names are: {', '.join(sorted(known))}"
            )


def is_truth(value: Any, text: str = "") -> bool:
    """Whether ``value`` is true or false: Python's bool or numpy's (a comparison of its numbers),
    or, where ``text`` is a name alone, 0 or 1: a flag as Kernel Tuner's specs write one (trial
    113: `use_local or not use_padding` was refused, `not use_padding or use_local == 1` taken).
    Another number is a mistake (trial 45: `when: "WG"`), and so is the 0 of `N % WG`, meant as
    `N % WG == 0`."""
    return (type(value).__name__ in ("bool", "bool_")
            or text.strip().isidentifier() and isinstance(value, numbers.Integral) and value in (0, 1))


def _flags(node: ast.AST) -> set[str]:
    """The names that ``node``, a condition, takes as true or false by themselves: alone, under
    ``not``, or as an operand of ``and``/``or`` (``use_local or not use_padding``)."""
    if isinstance(node, ast.Name):
        return {node.id}
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return _flags(node.operand)
    if isinstance(node, ast.BoolOp):
        return set().union(*(_flags(v) for v in node.values))
    return set()


def _a_condition(part: _Fn, text: str) -> _Fn:
    """``part``, an operand of ``and``/``or`` in a condition, raising ConditionError where it
    gives anything but true or false."""
    def checked(env: Env) -> Any:
        value = part(env)
        if not is_truth(value, text):
            raise ConditionError(f"its part {text!r} gives {_brief(repr(value))[1:-1]}, not true or false; write "
                                 "a condition there, such as a comparison")
        return value
    return checked


def _reparse(source: str, names: frozenset[str], condition: bool = False) -> Expr:
    e = None
    if not names:  # a constant: parse() keeps numbers as their value, not as text
        try:
            e = Expr.parse(ast.literal_eval(source))
        except (ValueError, SyntaxError):
            pass
    e = e or Expr.parse(source)
    return e.as_condition() if condition else e


def _brief(text: str, width: int = 60) -> str:
    """``text`` quoted, shortened to about ``width`` characters for a message."""
    return repr(clipped(text, width))


def _one_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__


def _check_depth(root: ast.expr, source: str) -> None:
    """Refuse a tree nested deeper than MAX_DEPTH (iteratively: deep trees overflow recursion)."""
    stack = [(root, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise ExpressionError(
                f"{_brief(source)} is nested too deeply (more than {MAX_DEPTH} levels); "
                "simplify it or split it into derived values"
            )
        stack.extend((c, depth + 1) for c in ast.iter_child_nodes(node) if isinstance(c, ast.expr))


def _subscript(container: Any, index: Any, what: str) -> Any:
    try:
        return container[index]
    except IndexError:
        if not isinstance(container, (tuple, list, str)):
            raise ExpressionError(f"index {index!r} is out of range for {what}") from None
        n = len(container)
        valid = f"use 0 to {n - 1}" if n else "it is empty"
        raise ExpressionError(f"index {index!r} is out of range for {what}, which has {n} item(s) ({valid})") from None
    except KeyError:  # not "unknown name": that KeyError is reserved for variables
        raise ExpressionError(f"{what} has no key {index!r}") from None


def _compile(node: ast.AST, source: str, names: set[str], conditions: bool = False) -> _Fn:
    def sub(n: ast.AST) -> _Fn:
        return _compile(n, source, names, conditions)

    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float, str, bool)):
        value = node.value
        if isinstance(value, int) and value.bit_length() > MAX_INT_BITS:
            raise ExpressionError(f"{_brief(source)}: {_too_big(f'a {value.bit_length()}-bit constant')}")
        return lambda env: value
    if isinstance(node, ast.Name):
        ident = node.id
        if ident in ("True", "False"):
            value = ident == "True"
            return lambda env: value
        names.add(ident)
        return lambda env: env[ident]
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        op = _GUARDED.get(type(node.op), _BINOPS[type(node.op)])
        left, right = sub(node.left), sub(node.right)
        return lambda env: _bounded(op(left(env), right(env)))
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        uop, operand = _UNARY[type(node.op)], sub(node.operand)
        return lambda env: uop(operand(env))
    if isinstance(node, ast.BoolOp):
        parts = [sub(v) for v in node.values]
        if conditions:
            parts = [_a_condition(p, ast.unparse(v)) for p, v in zip(parts, node.values, strict=True)]
        if isinstance(node.op, ast.And):
            return lambda env: all(p(env) for p in parts)
        return lambda env: any(p(env) for p in parts)
    if isinstance(node, ast.Compare) and all(type(o) in _CMPOPS for o in node.ops):
        first = sub(node.left)
        rest = [(_CMPOPS[type(o)], sub(c)) for o, c in zip(node.ops, node.comparators, strict=True)]

        def compare(env: Env) -> bool:
            left = first(env)
            for cmp, right_fn in rest:
                right = right_fn(env)
                if not cmp(left, right):
                    return False
                left = right
            return True

        return compare
    if isinstance(node, ast.IfExp):
        test, body, orelse = sub(node.test), sub(node.body), sub(node.orelse)
        return lambda env: body(env) if test(env) else orelse(env)
    if isinstance(node, (ast.Tuple, ast.List)):
        items = [sub(e) for e in node.elts]
        return lambda env: tuple(i(env) for i in items)
    if isinstance(node, ast.Subscript):
        container, index, what = sub(node.value), sub(node.slice), ast.unparse(node.value)
        return lambda env: _subscript(container(env), index(env), what)
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in FUNCTIONS
        and not node.keywords
    ):
        func, args = FUNCTIONS[node.func.id], [sub(a) for a in node.args]
        return lambda env: _bounded(func(*(a(env) for a in args)))
    what = type(node).__name__
    if isinstance(node, ast.Call):
        what = f"call of {ast.unparse(node.func)!r} (allowed: {', '.join(sorted(FUNCTIONS))})"
    elif isinstance(node, ast.Compare):  # trial 45: "Compare is not allowed", though comparisons are
        odd = next(o for o in node.ops if type(o) not in _CMPOPS)
        what = f"the operator {'is not' if isinstance(odd, ast.IsNot) else 'is'!r} (use == or !=)"
    raise ExpressionError(
        f"{source!r}: {what} is not allowed; use arithmetic, comparisons, and/or/not, "
        "if-else and the listed functions"
    )
