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
import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .errors import ExpressionError

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


def _pow(a: Any, b: Any) -> Any:
    if isinstance(b, (int, float)) and abs(b) > _MAX_EXPONENT:
        raise ExpressionError(f"exponent {b} is too large (limit {_MAX_EXPONENT})")
    return operator.pow(a, b)


@dataclass(frozen=True)
class Expr:
    """A parsed, whitelisted expression; call it with a mapping of variable values."""

    source: str
    names: frozenset[str]
    _fn: _Fn = field(repr=False, compare=False)

    @classmethod
    def parse(cls, source: str | float | bool) -> Expr:
        """Parse ``source``; numbers are accepted as constant expressions."""
        if isinstance(source, bool) or isinstance(source, (int, float)):
            value = source
            return cls(str(source), frozenset(), lambda env: value)
        if not isinstance(source, str) or not source.strip():
            raise ExpressionError(f"expected an expression string, got {source!r}")
        try:
            tree = ast.parse(source.strip(), mode="eval")
        except SyntaxError as exc:
            raise ExpressionError(f"{source!r} is not a valid expression ({exc.msg})") from None
        names: set[str] = set()
        fn = _compile(tree.body, source, names)
        return cls(source, frozenset(names), fn)

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        # the compiled closure does not pickle; the source re-parses to the same expression
        # (a spec travels to the measuring worker this way)
        return (_reparse, (self.source, self.names))

    def __call__(self, env: Env) -> Any:
        try:
            return self._fn(env)
        except ExpressionError:
            raise
        except KeyError as exc:
            raise ExpressionError(f"{self.source!r}: unknown name {exc.args[0]!r}") from None
        except (ArithmeticError, TypeError, ValueError) as exc:
            raise ExpressionError(f"{self.source!r}: {exc}") from None

    def check_names(self, known: set[str] | frozenset[str], where: str) -> None:
        """Raise if the expression uses a name outside ``known``; ``where`` locates it."""
        unknown = sorted(self.names - set(known))
        if unknown:
            raise ExpressionError(
                f"{where}: {self.source!r} uses unknown name(s) {', '.join(unknown)}; "
                f"known names are: {', '.join(sorted(known))}"
            )


def _reparse(source: str, names: frozenset[str]) -> Expr:
    if not names:  # a constant: parse() keeps numbers as their value, not as text
        try:
            return Expr.parse(ast.literal_eval(source))
        except (ValueError, SyntaxError):
            pass
    return Expr.parse(source)


def _compile(node: ast.AST, source: str, names: set[str]) -> _Fn:
    def sub(n: ast.AST) -> _Fn:
        return _compile(n, source, names)

    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float, str, bool)):
        value = node.value
        return lambda env: value
    if isinstance(node, ast.Name):
        ident = node.id
        if ident in ("True", "False"):
            value = ident == "True"
            return lambda env: value
        names.add(ident)
        return lambda env: env[ident]
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        op = _pow if isinstance(node.op, ast.Pow) else _BINOPS[type(node.op)]
        left, right = sub(node.left), sub(node.right)
        return lambda env: op(left(env), right(env))
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        uop, operand = _UNARY[type(node.op)], sub(node.operand)
        return lambda env: uop(operand(env))
    if isinstance(node, ast.BoolOp):
        parts = [sub(v) for v in node.values]
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
        container, index = sub(node.value), sub(node.slice)
        return lambda env: container(env)[index(env)]
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in FUNCTIONS
        and not node.keywords
    ):
        func, args = FUNCTIONS[node.func.id], [sub(a) for a in node.args]
        return lambda env: func(*(a(env) for a in args))
    what = type(node).__name__
    if isinstance(node, ast.Call):
        what = f"call of {ast.unparse(node.func)!r} (allowed: {', '.join(sorted(FUNCTIONS))})"
    raise ExpressionError(
        f"{source!r}: {what} is not allowed; use arithmetic, comparisons, and/or/not, "
        "if-else and the listed functions"
    )
