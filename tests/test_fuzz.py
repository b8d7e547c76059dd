"""Deterministic fuzzing of autotune's inputs: CLI arguments, spec YAML, profiles and expressions.

Input ``family#number`` depends on nothing else: the first CLI and spec inputs are a sweep of listed bad
values, one at a time, the rest come from a ``random.Random`` seeded by family and number (:func:`_rng`).
A failure is reported with its input (the argv, the spec's changes to the built-in spec trimmed by
:func:`_trimmed`, the profile's changes to the good one, the expression) and its ``family#number``.
An input passes when autotune refuses it, if at all, with an ``AutotuneError`` whose message is one line
(or, on the command line, an argparse usage error: ``SystemExit(2)``), within the family's time limit,
losing no profile or backup. Nothing reaches an OpenCL device: discovery is patched to find none, or,
for the deeper CLI runs, the fake device, whose run stops where measuring would begin.
"""

from __future__ import annotations

import copy
import random
import shutil
import signal
import time
import traceback
import warnings
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml

from autotune import cli, loader, profiles, settings, space, tuner
from autotune import device as devices
from autotune import spec as specs
from autotune.errors import AutotuneError
from autotune.expr import Expr
from autotune.resources import data_dir
from conftest import FAKE

SEED = 20261121
#: Inputs per family (the CLI and spec ones start with a sweep of listed bad values), and the seconds one input
#: may take before it counts as a hang.
COUNTS = {"cli": 750, "spec": 820, "profile": 200, "expr": 600}
LIMITS = {"cli": 10.0, "spec": 5.0, "profile": 5.0, "expr": 1.0}
_PACKAGE = str(Path(cli.__file__).parent)
_REFUSED = object()  # what _refused returns for an input autotune turned down


def _rng(family: str, number: int) -> random.Random:
    """The generator of input ``family#number`` (string seeds hash the same in every process)."""
    return random.Random(f"{SEED}:{family}:{number}")


# --------------------------------------------------------------------------- harness


class _Hang(BaseException):
    """An input ran past its time limit (a BaseException, so that no ``except Exception`` hides it)."""


class _Violation(AssertionError):
    """An input broke one of the test's rules (not an ``assert`` of autotune's own)."""


class _Measuring(AutotuneError):
    """Where the deep CLI runs stop: every check before the first measurement passed."""


@contextmanager
def _deadline(seconds: float) -> Iterator[None]:
    """Raise _Hang in this (the main) thread after ``seconds``."""
    def fire(signum: int, frame: Any) -> None:
        raise _Hang

    previous = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _origin(exc: BaseException) -> str:
    """Where ``exc`` was raised: the innermost autotune frame, and the innermost frame when elsewhere."""
    frames = traceback.extract_tb(exc.__traceback__)
    if not frames:
        return "?"
    ours = [f for f in frames if f.filename.startswith(_PACKAGE)]
    where = [f"autotune/{Path(f.filename).name}:{f.lineno} ({f.name})" for f in ours[-1:]]
    if not ours or ours[-1] is not frames[-1]:
        where.append(f"raised in {Path(frames[-1].filename).name}:{frames[-1].lineno} ({frames[-1].name})")
    return ", ".join(where)


def _brief(text: str, width: int = 300) -> str:
    """``text``, its middle cut out when longer than ``width``."""
    if len(text) <= width:
        return text
    return f"{text[:width * 2 // 3]} ...[{len(text)} characters]... {text[-width // 3:]}"


def _check(condition: Any, message: str) -> None:
    """``assert``, without the explanation pytest adds (the report shows the message)."""
    if not condition:
        raise _Violation(message)


def _refused(call: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``call(*args, **kwargs)``, or _REFUSED when it raised an AutotuneError, whose message must be one line."""
    try:
        return call(*args, **kwargs)
    except AutotuneError as exc:
        text = str(exc)
        _check("\n" not in text and "\r" not in text,
               f"multi-line message from {_origin(exc)}: {type(exc).__name__}: {_brief(repr(text))}")
        return _REFUSED


class _Fuzz:
    """Runs inputs under a time limit, counts them per family, and collects the distinct failures."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self.seconds: Counter[str] = Counter()
        self.slowest: dict[str, tuple[float, str]] = {}
        self.failures: dict[str, list[str]] = {}

    def __call__(self, family: str, number: int, shown: str, case: Callable[[], None]) -> None:
        self.counts[family] += 1
        what = f"{family}#{number}: {_brief(shown)}"
        start = time.perf_counter()
        try:
            with _deadline(LIMITS[family]):
                case()
        except _Hang:
            self._fail(f"{family}: hang (still running after {LIMITS[family]:g} s)", what)
        except _Violation as exc:
            text = str(exc)
            self._fail(f"{family}: {text.split(': ')[0]}", f"{what}\n        {_brief(text, 500)}")
        except KeyboardInterrupt:
            raise
        except BaseException as exc:  # noqa: B036 -- anything else is a traceback the user would see
            message = (str(exc).strip().splitlines() or [""])[0]
            self._fail(f"{family}: {type(exc).__name__} at {_origin(exc)}",
                       f"{what}\n        {type(exc).__name__}: {_brief(message)}")
        took = time.perf_counter() - start
        self.seconds[family] += took
        if took > self.slowest.get(family, (0.0, ""))[0]:
            self.slowest[family] = (took, what)

    def _fail(self, key: str, example: str) -> None:
        self.failures.setdefault(key, []).append(example)

    def report(self) -> str:
        lines = [f"{len(self.failures)} distinct failure(s):"]
        for key, examples in sorted(self.failures.items()):
            lines.append(f"- {key} [{len(examples)} input(s)], e.g.")
            lines.extend(f"    {e}" for e in examples[:2])
        return "\n".join(lines)


# --------------------------------------------------------------------------- junk values


_NAN, _INF = float("nan"), float("inf")
_JUNK_STRINGS = ["", " ", "x", "N / 0", "1e309", "nan", "'s'", "\U0001f642", "a\nb", "-cl-bogus", "%s", "{", "[99]",
                 "\x00", "null", "true", "latin1.cl", "dir.cl", "self.cl", "binary_include.cl", "missing_include.cl",
                 "/", "/etc", "autotune.h", "nul\x00l.cl", "missing.py", "a" * 3000, "-", "__init__", "..", "\t"]
_JUNK_KEYS: list[Any] = ["x", "N\n", "kernel ", "", "\U0001f642", 1, None, True, 2.5, "MWG", "global", "Global", "when",
                         "values", "a\nb", "parameters", "default", "choices", "N", "seconds", "is_gpu"]


def _junk(rng: random.Random, depth: int = 0) -> Any:
    """A value of a random type: numbers at the edges, odd strings, containers, deep nesting."""
    kind = rng.randrange(11 if depth < 2 else 5)
    if kind == 0:
        return rng.choice([0, -1, 1, 3, 7, 10**30, 2**63, -(10**20), 10**400])
    if kind == 1:
        return rng.choice([_NAN, _INF, -_INF, 0.5, 1e308, -0.0, 1e-320])
    if kind == 2:
        return rng.choice(_JUNK_STRINGS)
    if kind == 3:
        return rng.random() < 0.5
    if kind == 4:
        return None
    if kind == 5:
        return [_junk(rng, depth + 1) for _ in range(rng.randrange(4))]
    if kind == 6:
        return {rng.choice(_JUNK_KEYS): _junk(rng, depth + 1) for _ in range(rng.randrange(4))}
    if kind == 7:  # deep nesting
        value: Any = rng.choice([1, "N", None])
        for _ in range(rng.randint(20, 120)):
            value = [value] if rng.random() < 0.5 else {"k": value}
        return value
    if kind == 8:
        return _expression(rng)
    if kind == 9:
        return [rng.choice([1, "x", 2.5])] * rng.choice([100, 2000])
    return rng.choice([[], {}, "", 0])


# --------------------------------------------------------------------------- expressions

_ENV: dict[str, Any] = {"N": 256, "M": 3, "K": 64, "x": 1.5, "neg": -8, "layout": "row", "is_gpu": True,
                        "max_work_item_sizes": (1024, 1024, 64), "max_work_group_size": 256, "seconds": 1e-3,
                        "fmt": "%d", "big": 2**4000}
_ATOMS = ["0", "1", "2", "3", "-1", "0.5", "1e308", "1e309", "255", "4096", "9" * 40, "0x10", "1_000", "1j", ".5",
          "N", "M", "K", "x", "neg", "layout", "is_gpu", "max_work_item_sizes", "max_work_group_size", "seconds",
          "fmt", "big", "unknown", "True", "False", "None", "'a'", "'row'", "'%s'", "'%0999999d'", "''", "(1, 2)",
          "[]", "()", "...", "nan", "inf"]
_BINOPS = ["+", "-", "*", "/", "//", "%", "**", "<<", ">>", "&", "|", "^", "<", "<=", "==", "!=", ">", ">=", "and",
           "or", "in", "not in", "is", "@"]
_FUNCS = ["min", "max", "abs", "int", "sqrt", "log2", "ceil", "floor", "is_pow2", "pow", "len", "__import__", "eval"]
_TOKENS = [*_ATOMS, *_BINOPS, *_FUNCS, "(", ")", "[", "]", "{", "}", ",", ":", ".", "=", ":=", "~", "not", "if",
           "else", "lambda", ";", "\\", "#", "\n", "\t", "`", "$", "?", "!", "'", '"', "for", "yield", "await", "*"]
_NASTY = ["2 ** 10 ** 9", "(N << 4000) << 100", "'a' * 4096 * 4096", "max_work_item_sizes * 4096", "10.0 ** 400",
          "int(1e309)", "sqrt(-1)", "int(1e309 - 1e309)", "log2(0)", "(-8) ** 0.5", "int('9' * 4301)", "is_pow2(0.5)",
          "big * big", "big ** 2", "big << 1", "-big - big", "fmt % N", "'%0999999999d' % 1", "(1,) * 4097",
          "max_work_item_sizes[99]", "max_work_item_sizes['a']", "N[0]", "layout[0:2]", "'abc' in N", "min()",
          "max(())", "abs('a')", "ceil(1e309 - 1e309)", "floor(1e309)", "int('x')", "1 / 0", "1 // 0", "1 % 0",
          "0 ** -1", "2 ** -129", "2.0 ** 1024", "(lambda: 1)()", "__import__('os')", "x.real", "{1: 2}[1]",
          "f'{N}'", "[i for i in (1, 2)]", "(y := 1)", "*N", "N if", "", " ", "\x00", "N\x00", "'\udcff'",
          "\U0001f642", "N\n+ 1", "1" * 2001, "9" * 1300, "int('1' * 4096)", "sqrt(big)", "big / 3"]


def _soup(rng: random.Random) -> str:
    return rng.choice([" ", ""]).join(rng.choice(_TOKENS) for _ in range(rng.randint(1, 30)))


def _tree(rng: random.Random, depth: int) -> str:
    """A random, mostly well-formed expression over _ATOMS."""
    if depth <= 0 or rng.random() < 0.2:
        return rng.choice(_ATOMS)
    kind = rng.randrange(7)
    if kind == 0:
        return f"({_tree(rng, depth - 1)} {rng.choice(_BINOPS)} {_tree(rng, depth - 1)})"
    if kind == 1:
        return f"{rng.choice(['-', '+', 'not ', '~'])}{_tree(rng, depth - 1)}"
    if kind == 2:
        args = ", ".join(_tree(rng, depth - 1) for _ in range(rng.randrange(4)))
        return f"{rng.choice(_FUNCS)}({args})"
    if kind == 3:
        return f"({_tree(rng, depth - 1)} if {_tree(rng, depth - 1)} else {_tree(rng, depth - 1)})"
    if kind == 4:
        return f"{_tree(rng, depth - 1)}[{_tree(rng, depth - 1)}]"
    if kind == 5:
        return f"({', '.join(_tree(rng, depth - 1) for _ in range(rng.randrange(4)))},)"
    return f"({_tree(rng, depth - 1)} in {_tree(rng, depth - 1)})"


def _long(rng: random.Random) -> str:
    """Repetitions: long chains, deep nesting, sources past the length limit."""
    k = rng.choice([5, 30, 49, 50, 51, 100, 400, 1000])
    return rng.choice([
        "N" + " + N" * k, "2 ** " * k + "2", "-" * k + "1", "not " * k + "N", "(" * k + "N" + ")" * k,
        "[" * k + "]" * k, "N << " * k + "1", "max_work_item_sizes" + "[0]" * k, "min(" * k + "1" + ")" * k,
        "'a' * 64 * " * k + "1", "N ** " * k + "N", "(1, " * k + "1" + ")" * k, "N if N else " * k + "N",
        "N == " * k + "N", "N or " * k + "N", "~" * k + "N", "abs(" * k + "neg" + ")" * k,
    ])


def _expression(rng: random.Random) -> str:
    r = rng.random()
    if r < 0.35:
        return _soup(rng)
    if r < 0.8:
        return _tree(rng, rng.randint(1, 7))
    if r < 0.92:
        return _long(rng)
    return rng.choice(_NASTY)


def _expr_case(source: str) -> None:
    e = _refused(Expr.parse, source)
    if e is not _REFUSED:
        for env in (_ENV, {}):
            _refused(e, env)


def _fuzz_expressions(fuzz: _Fuzz) -> None:
    for n in range(COUNTS["expr"]):
        source = _expression(_rng("expr", n))
        fuzz("expr", n, f"Expr.parse({source!r})", lambda source=source: _expr_case(source))


# --------------------------------------------------------------------------- documents (specs, profiles)

Path_ = tuple[Any, ...]


def _paths(node: Any, prefix: Path_ = ()) -> list[Path_]:
    """The path of every value below ``node``."""
    items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
    out: list[Path_] = []
    for key, value in items:
        out.append((*prefix, key))
        out.extend(_paths(value, (*prefix, key)))
    return out


def _get(doc: Any, path: Path_) -> Any:
    for key in path:
        doc = doc[key]
    return doc


def _dotted(path: Path_) -> str:
    return "".join(f".{k}" if isinstance(k, str) and k.isidentifier() else f"[{k!r}]" for k in path).lstrip(".")


def _rename(doc: Any, path: Path_, new: Any) -> None:
    """Rename the key at ``path`` (a mapping's), keeping the order of the others."""
    parent = _get(doc, path[:-1])
    items = [(new if k == path[-1] else k, v) for k, v in parent.items()]
    parent.clear()
    parent.update(items)


def _mangle_bytes(rng: random.Random, data: bytes) -> tuple[bytes, str]:
    """A text-level corruption of a YAML file: truncation, odd bytes, broken lines."""
    op = rng.randrange(7)
    if op == 0:
        cut = rng.randrange(len(data) + 1)
        return data[:cut], f"truncated at byte {cut}"
    if op == 1:
        out = bytearray(data)
        spots = {rng.randrange(len(out)): rng.choice(b"\xff\x00\t:-[]{}&*!%|>\"'#?,\n ") for _ in range(6)}
        for i, byte in spots.items():
            out[i] = byte
        return bytes(out), f"bytes replaced: {', '.join(f'{i}: {bytes([b])!r}' for i, b in sorted(spots.items()))}"
    if op == 2:
        at = rng.randrange(len(data) + 1)
        bad = rng.choice([b"\xff", b"\xc3\x28", b"\xed\xa0\x80", b"\x00", b"\xef\xbb\xbf", b"\x1b[2J", b"\r"])
        return data[:at] + bad + data[at:], f"{bad!r} inserted at byte {at}"
    lines = data.split(b"\n")
    i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
    if op == 3:
        del lines[i]
        what = f"line {i} deleted"
    elif op == 4:
        lines.insert(i, lines[j])
        what = f"line {j} copied before line {i}"
    elif op == 5:
        lines[i], lines[j] = lines[j], lines[i]
        what = f"lines {i} and {j} swapped"
    else:
        lines[i] = rng.choice([b" ", b"\t", b"- ", b"? "]) + lines[i]
        what = f"line {i} indented"
    return b"\n".join(lines), what


def _dump(doc: Any) -> bytes:
    return yaml.safe_dump(doc, sort_keys=False, allow_unicode=True, width=100).encode()


# --------------------------------------------------------------------------- family 2: specs

_EXPR_KEYS = {"constraints", "launch", "metrics", "tolerance", "derived", "requires", "local_memory", "scratch"}
_SUFFIXES = [" / 0", " // 0", " % 0", " ** 99", " ** 1e9", " << 5000", "[99]", "[0]", " + unknown_name", " +", ")",
             " if N else", " and 'a'", " * 'ab'", " * max_work_item_sizes", " + 1e309", " - 1e309 * 0", " ** 0.5",
             " < 'a'", ", 1", " + 0.5"]
_PREFIXES = ["(", "-", "not ", "'a' + ", "1 / ", "max_work_item_sizes[9] + ", "2 ** ", "~", "[", "lambda: ",
             "__import__('os').", "(1, 2) + ", "1e309 * "]
_REPLACEMENTS = ["1e309", "1e309 - 1e309", "'str'", "(1, 2)", "-1", "0", "0.5", "-(10 ** 30)", "'%09999d' % 1",
                 "max_work_item_sizes", "1j", "None", "", " ", "N" * 3000, "(" * 60 + "1" + ")" * 60, "nan", "inf",
                 "-1e309", "True", "1 if seconds else 'x'", "10 ** 1000", "2 ** 4095", "-0.0"]


def _mangle(rng: random.Random, text: str) -> str:
    op = rng.randrange(6)
    if op == 0:
        return text + rng.choice(_SUFFIXES)
    if op == 1:
        return rng.choice(_PREFIXES) + text
    if op == 2:
        return rng.choice(_REPLACEMENTS)
    if op == 3:
        return _expression(rng)
    if op == 4:
        return " + ".join([f"({text})"] * rng.choice([2, 50, 400]))
    at = rng.randrange(len(text) + 1)
    return text[:at] + rng.choice(_TOKENS) + text[at:]


def _mutate_doc(rng: random.Random, doc: Any, expr_paths: Callable[[Path_], bool], junk: Callable[[], Any]) -> str:
    """One random change to ``doc`` (in place): delete, junk value, renamed or added key, mangled expression."""
    paths = _paths(doc)
    op = rng.choice(["delete", "junk", "junk", "rename", "expr", "expr", "expr", "add"])
    if op == "expr":
        found = [p for p in paths if expr_paths(p) and isinstance(_get(doc, p), (str, int, float))]
        if found:
            path = rng.choice(found)
            new = _mangle(rng, str(_get(doc, path)))
            _get(doc, path[:-1])[path[-1]] = new
            return f"{_dotted(path)} := {new!r}"
        op = "junk"
    if op == "add" or not paths:
        holders = [()] + [p for p in paths if isinstance(_get(doc, p), dict)]
        holder, key, value = rng.choice(holders), rng.choice(_JUNK_KEYS), junk()
        _get(doc, holder)[key] = value
        return f"{_dotted((*holder, key))} := {value!r}"
    path = rng.choice(paths)
    if op == "delete":
        del _get(doc, path[:-1])[path[-1]]
        return f"del {_dotted(path)}"
    if op == "rename" and isinstance(_get(doc, path[:-1]), dict):
        new_key = rng.choice(_JUNK_KEYS)
        _rename(doc, path, new_key)
        return f"rename {_dotted(path)} -> {new_key!r}"
    value = junk()
    _get(doc, path[:-1])[path[-1]] = value
    return f"{_dotted(path)} := {value!r}"


def _trimmed(doc: dict[str, Any]) -> dict[str, Any]:
    """``doc`` with each parameter cut to its first value and those its baseline and default use, and no hints.

    A broken launch makes every configuration invalid, and enumerating then visits all of them: this keeps
    each input to a few hundred configurations instead of up to 118 million.
    """
    used: dict[str, list[Any]] = {}
    for config in (doc.get("baseline") or {}, doc.get("default") or {}):
        for name, value in config.items():
            used.setdefault(name, []).append(value)
    for name, raw in doc["parameters"].items():
        values = raw["values"] if isinstance(raw, dict) else raw
        kept = [v for i, v in enumerate(values) if i == 0 or v in used.get(name, [])]
        if isinstance(raw, dict):
            raw["values"] = kept
        else:
            doc["parameters"][name] = kept
    doc.pop("hints", None)
    return doc


def _spec_folder(folder: Path) -> None:
    """The templates beside the spec inputs, and files that junk values of ``template`` may name."""
    shutil.copytree(data_dir("kernel_templates"), folder)
    (folder / "latin1.cl").write_bytes(b"// caf\xe9\n__kernel void k(__global float* x) { }\n")
    (folder / "dir.cl").mkdir()
    (folder / "self.cl").write_text('#include "self.cl"\n')
    (folder / "binary_include.cl").write_text('#include "latin1.cl"\n')
    (folder / "missing_include.cl").write_text('#include "nope.h"\n')


_BAD_EXPRS = ["'str'", "(1, 2)", "1e309", "1e309 - 1e309", "-1", "N / 0", "None", "max_work_item_sizes", "10 ** 1000",
              "1j", "-1e309", "0.5", ""]
_ANY_JUNK: list[Any] = [None, 0, -1, "", "x", [], {}, [1], {"a": 1}, _NAN, True, 10**400, "\x00", "a\nb"]
#: The spec sweep: (where, value) pairs, each set on the next built-in spec in turn; the likely mistakes per key.
_SPEC_SWEEP: list[tuple[Path_, Any]] = [
    *((("template",), v) for v in ["latin1.cl", "dir.cl", "self.cl", "binary_include.cl", "missing_include.cl",
                                    "nul\x00l.cl", "/", "/etc", "autotune.h", "..", "x" * 300, "\U0001f642.cl",
                                    "case.yaml"]),
    *((("reference",), v) for v in ["missing.py", "nul\x00l.py", "x" * 300 + ".py", "dir.cl", "os", "a.b", "../x",
                                     "matmul", "nul\x00l", "x" * 300]),
    *((("local_memory",), v) for v in _BAD_EXPRS),
    *((("scratch", "part"), v) for v in _BAD_EXPRS),
    *((("metrics", "GB/s"), v) for v in _BAD_EXPRS),
    *((("tolerance", k), v) for k in ("rtol", "atol") for v in _BAD_EXPRS),
    *((("derived", "D"), v) for v in _BAD_EXPRS),
    *((("derived", "N"), v) for v in ["1", "N"]),
    *((("requires",), [v]) for v in _BAD_EXPRS),
    *((("constraints",), [v]) for v in _BAD_EXPRS),
    *((("launch",), {"global": [v], "local": [w]}) for v in _BAD_EXPRS for w in ("1", "0", "-1", "1e309", "'s'")),
    *((("launch",), v) for v in [[], [{}], {"global": []}, {"global": ["1"] * 4}, {"global": ["1"], "local": []},
                                  {"global": ["1"], "when": "False"}, {"global": ["1"], "args": []},
                                  {"global": ["1"], "entry": ""}, {"global": ["1"], "when": "'s'"}]),
    *((("problem", "N"), v) for v in [10**30, 2**40, 2**40 + 1, 0, True, 1.5, "5", {"default": "a", "choices": []},
                                       {"choices": [1, 2]}, {"default": 5, "choices": [5]}, {"choices": ["a", "a"]}]),
    *((("problem", k), 5) for k in ["N\n", "", "a b", "is_gpu", "seconds", 5, None]),
    *((("parameters", "ZZ"), v) for v in [[1, 1], [[1]], [_NAN], [10**400], ["a b"], [True, 1], [1, 1.0], [],
                                           {"values": [1], "when": "1e309"}, {"values": [1, 2], "when": "'s'"},
                                           {"values": [1, 2], "when": "ZZ"}, {"values": [1, 2]}, ["x\ny"]]),
    *((("parameters", k), [1, 2]) for k in ["N", "is_gpu", "seconds", "a\nb", "ZZ\n", True, None]),
    *((("build_flags", k), v) for k, v in [("f", "-cl-x"), ("f", 5), ("f", ""), ("f", "-D N=1"), ("N", "-cl-x"),
                                           ("f\n", "-x"), ("f", "-x\n-y")]),
    *(((key,), v) for key in ("baseline", "default") for v in [{"ZZ": 1}, [1], {"N": 5}, {True: 1}]),
    *((("hints",), v) for v in [[{"ZZ": 1}], [[1]], {"a": 1}, [None]]),
    *((("kernel",), v) for v in ["", "a b", "matmul\n", 5, None, "x" * 300, "\U0001f642", True]),
    *((("ceiling",), v) for v in ["copy", "nope", 5, None, ["copy"]]),
    *(((key,), v) for key in ("outputs", "inplace", "args") for v in [[], ["nope"], "x", [None], [[1]], ["x"] * 100]),
    *(((key,), v) for key in ("kernel", "description", "problem", "parameters", "build_flags", "constraints",
                              "local_memory", "scratch", "args", "outputs", "launch", "metrics", "tolerance",
                              "baseline", "default", "ceiling", "inplace", "hints", "derived", "requires")
      for v in _ANY_JUNK),
]


def _spec_sweep_input(number: int, bases: dict[str, dict[str, Any]]) -> tuple[str, bytes]:
    """Input ``spec#number`` of the sweep: one entry of _SPEC_SWEEP on one built-in spec (in turn)."""
    name = sorted(bases)[number % len(bases)]
    doc = copy.deepcopy(bases[name])
    path, value = _SPEC_SWEEP[number]
    node = doc
    for key in path[:-1]:
        if not isinstance(node.get(key), dict):
            node[key] = {}
        node = node[key]
    node[path[-1]] = value
    return f"{name}: {_dotted(path)} := {value!r}", _dump(doc)


def _spec_input(number: int, bases: dict[str, dict[str, Any]]) -> tuple[str, bytes]:
    """Input ``spec#number``: a built-in spec (trimmed) with 1 to 3 random changes, as YAML bytes."""
    rng = _rng("spec", number)
    name = rng.choice(sorted(bases))
    doc = copy.deepcopy(bases[name])

    def is_expr(path: Path_) -> bool:
        return path[0] in _EXPR_KEYS or "when" in path

    changes = [_mutate_doc(rng, doc, is_expr, lambda: _junk(rng)) for _ in range(rng.randint(1, 3))]
    data = _dump(doc)
    if rng.random() < 0.1:
        data, what = _mangle_bytes(rng, data)
        changes.append(what)
    return f"{name}: " + "; ".join(changes), data


def _spec_case(path: Path, data: bytes) -> None:
    """Load the spec ``data`` and use it as a tuning run does before it builds anything."""
    path.write_bytes(data)
    spec = _refused(specs.load, path)
    if spec is _REFUSED:
        return
    problem = _refused(spec.resolve_problem, {})
    if problem is _REFUSED:
        problem = spec.default_problem()
    facts = FAKE.facts()
    _refused(space.enumerate_valid, spec, problem, facts, limit=200)
    _refused(space.check, spec, spec.default_config, problem, facts)
    _refused(spec.throughput, problem, 1.0)
    _refused(specs.lint, spec)


def _fuzz_specs(fuzz: _Fuzz, folder: Path) -> None:
    _spec_folder(folder)
    bases = {p.stem: _trimmed(yaml.safe_load(p.read_text())) for p in data_dir("search_spaces").glob("*.yaml")}
    for n in range(COUNTS["spec"]):
        shown, data = _spec_sweep_input(n, bases) if n < len(_SPEC_SWEEP) else _spec_input(n, bases)
        fuzz("spec", n, shown, lambda data=data: _spec_case(folder / "case.yaml", data))


# --------------------------------------------------------------------------- family 3: profiles

_FIELDS = ("problem", "params", "build_flags", "time_ms", "spread_ms", "throughput", "trials", "tuned_at",
           "spec_hash", "partial", "baseline_ms", "error", "tolerance_used", "extra")
_PROFILE_JUNK: list[Any] = [_NAN, _INF, -_INF, "fast", "12 GB/s", None, [], {}, -1, 0, 10**400, "", True, [1, 2], [[1]],
                            {"GB/s": "x"}, {"N": 10**400}, {"N": -1}, {"N": _NAN}, {"N": 0}, {"N": 2**60},
                            {"VW": [1]}, [None], "abc", list(range(2000)), "2026-13-45", 1e-320, [_NAN, _INF],
                            {"ELEM": "char", "VW": 999}, {"unknown": 1}, [{"a": 1}], {"x": [1, 2]}]
#: Wrong values for each field of an entry, the likeliest hand edits first.
_FIELD_JUNK: dict[str, list[Any]] = {
    "problem": [{"N": 10**400}, {"N": -1}, {"N": 0}, {"N": _NAN}, {"N": "big"}, {"N": [1]}, {"N": True}, "N=1",
                [["N", 1]], {}, None, 5, {"N": 2**60}, {"N": 1e300}],
    "params": [{"VW": [1]}, {"VW": 999}, {"nope": 1}, {}, [["VW", 4]], "x", None, {"VW": None}, {"ELEM": {"a": 1}},
               {"VW": _NAN}],
    "build_flags": [[1, 2], [[1]], "abc", {"a": "b"}, [None], 5, ["-cl-fast-relaxed-math"], [{"x": 1}], [_NAN], True],
    "time_ms": [_NAN, _INF, -_INF, -1, 0, "fast", "1.5", None, [], 10**400, True, 1e-320],
    "spread_ms": ["x", [1], [_NAN, _INF], 5, {}, [1, 2, 3], [[1], [2]], list(range(2000)), [None, None]],
    "throughput": ["12 GB/s", {"GB/s": "x"}, [1, 2], {"GB/s": _NAN}, {"GB/s": [1]}, {1: 2}, {"GB/s": 10**400},
                   {"GB/s": None}],
    "trials": [_NAN, _INF, -_INF, "many", -1, 1e309, 10**400, [1], 2.5, True, None],
    "tuned_at": [[], {}, 5, None, "", "\x00"],
    "spec_hash": [5, None, [], {}, "", list(range(2000)), True],
    "partial": ["no", "yes", [], 2, _NAN, None],
    "baseline_ms": ["x", [], _NAN, -1, {}, 10**400],
    "error": ["x", [], _NAN, _INF, {}],
    "tolerance_used": ["x", [], _NAN, -5, {}],
    "extra": [[], "x", 5, [["a", 1]], {"a": {"b": [1]}}, [1, 2], {1: 2}],
}
_BOMB = "".join(f"l{i}: &l{i} [" + ", ".join([f"*l{i - 1}" if i else '"lol"'] * 10) + "]\n" for i in range(9))
_WHOLE = [b"", b"   \n", b"null\n", b"[]\n", b"42\n", b"{}\n", b"kernels: 5\n", b"kernels:\n  reverse: 5\n",
          b"kernels:\n  reverse: [5]\n", b"---\na: 1\n---\nb: 2\n", b"!!python/object/apply:os.system ['true']\n",
          b"[" * 5000 + b"]" * 5000, _BOMB.encode() + b"kernels: {}\n", b"device: &d [*d]\n", b"\xef\xbb\xbf{}\n",
          b"kernels: {reverse: [{problem: {N: 1}, params: {}, time_ms: .nan, spec_hash: x}]}\n", b"\t\n",
          b"kernels: !!set {a, b}\n",
          b"kernels: {reverse: [{problem: 2026-11-21, params: {}, time_ms: 1, spec_hash: x}]}\n"]


class _Profiles:
    """A good profile of the fake device (three entries, so with a backup) and the entries saved onto it."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.path = profiles.path_for(FAKE.slug, folder)
        self.bak = Path(f"{self.path}.bak")
        self.spec = specs.load("reverse")
        self.problem = self.spec.default_problem()
        config = space.enumerate_valid(self.spec, self.problem, FAKE.facts(), limit=1)[0]
        self.entries = [self._entry(config, {"N": n}, t) for n, t in ((self.problem["N"], 2.0), (4096, 0.5),
                                                                        (1 << 20, 1.0), (3, 9.0))]
        for e in self.entries[:3]:
            profiles.save(e, "reverse", FAKE.profile_header(), self.path)
        mul1 = specs.load("mul1")
        mconfig = space.enumerate_valid(mul1, mul1.default_problem(), FAKE.facts(), limit=1)[0]
        profiles.save(profiles.Entry(problem=mul1.default_problem(), params=mul1.without_flags(mconfig),
                                     build_flags=tuple(mul1.enabled_flags(mconfig)), time_ms=3.0,
                                     throughput={"GB/s": 1.0}, trials=4, tuned_at="2026-11-21T00:00:00Z",
                                     spec_hash=mul1.spec_hash), "mul1", FAKE.profile_header(), self.path)
        #: what choose() looks up: each tuned problem, so that a broken entry is the exact one of some lookup
        self.lookups = [(self.spec, dict(e.problem)) for e in self.entries[:3]] + [(mul1, mul1.default_problem())]
        self.good, self.good_bak = self.path.read_bytes(), self.bak.read_bytes()
        self.good_doc = yaml.safe_load(self.good)
        assert profiles.read(self.bak), "the setup needs a good backup"

    def _entry(self, config: dict[str, Any], problem: dict[str, Any], t: float) -> profiles.Entry:
        return profiles.Entry(problem=problem, params=self.spec.without_flags(config),
                              build_flags=tuple(self.spec.enabled_flags(config)), time_ms=t,
                              throughput={"GB/s": 10.0 / t}, trials=12, tuned_at="2026-11-21T00:00:00Z",
                              spec_hash=self.spec.spec_hash, baseline_ms=3.0 * t, spread_ms=(0.9 * t, 1.1 * t),
                              error=1e-7, tolerance_used=0.25)


def _profile_input(number: int, env: _Profiles) -> tuple[str, bytes, profiles.Entry]:
    """Input ``profile#number``: the good profile changed as text or as YAML, and the entry to save onto it."""
    rng = _rng("profile", number)
    entry = rng.choice(env.entries)
    r = rng.random()
    if r < 0.1:
        data = rng.choice(_WHOLE)
        return f"whole file {_brief(repr(data), 200)}", data, entry
    if r < 0.4:
        data, what = _mangle_bytes(rng, env.good)
        return what, data, entry
    doc = copy.deepcopy(env.good_doc)
    changes = []
    for _ in range(rng.randint(1, 3)):
        kernels = doc.get("kernels") if isinstance(doc, dict) else None
        lists = [(k, v) for k, v in kernels.items() if isinstance(v, list) and v] if isinstance(kernels, dict) else []
        if lists and rng.random() < 0.6:  # an entry's field: the likeliest hand edit
            kernel, items = rng.choice(lists)
            i = rng.randrange(len(items))
            if not isinstance(items[i], dict):
                continue
            field = rng.choice(_FIELDS)
            if rng.random() < 0.2:
                items[i].pop(field, None)
                changes.append(f"del kernels.{kernel}[{i}].{field}")
            else:
                pool = rng.choice([_FIELD_JUNK[field]] * 3 + [_PROFILE_JUNK, [_junk(rng)]])
                value = copy.deepcopy(rng.choice(pool))  # the pools stay as they are for the next input
                items[i][field] = value
                changes.append(f"kernels.{kernel}[{i}].{field} := {_brief(repr(value), 120)}")
        elif lists and rng.random() < 0.3:  # many entries (aliases of one when dumped)
            kernel, items = rng.choice(lists)
            items.extend(items * rng.choice([10, 50]))
            changes.append(f"kernels.{kernel} repeated to {len(items)} entries")
        else:
            changes.append(_mutate_doc(rng, doc, lambda p: False,
                                       lambda: copy.deepcopy(rng.choice(_PROFILE_JUNK + [_junk(rng)]))))
    return "; ".join(changes), _dump(doc), entry


def _problems(doc: Any) -> set[tuple[str, str]]:
    """(kernel, problem) of every entry of a profile document (read with its shape checked)
    whose problem is a mapping; a kernel whose entries are no list has none."""
    return {(str(k), repr(sorted(map(repr, e["problem"].items()))))
            for k, items in (doc.get("kernels") or {}).items() for e in (items if isinstance(items, list) else ())
            if isinstance(e.get("problem"), dict)}


def _profile_case(env: _Profiles, data: bytes, entry: profiles.Entry, show: Callable[[], None]) -> None:
    """Read, look up, show and save onto the profile ``data``; a failed save must leave both files alone."""
    env.path.write_bytes(data)
    env.bak.write_bytes(env.good_bak)
    doc = _refused(profiles.read, env.path)
    if doc is not _REFUSED:
        for kernel in [*(doc.get("kernels") or {}), "reverse", "absent"]:
            _refused(profiles.entries, doc, kernel, str(env.path))
    shape = _refused(profiles.read, env.path, check_entries=False)  # as load_kernel reads it
    for spec, problem in env.lookups:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            loader.choose(spec, FAKE, problem, folders=[env.folder])  # must not raise: warn and fall back
        # a broken document is ignored whole; a malformed entry of this kernel alone (others' are not read)
        if shape is _REFUSED:
            expected = "ignoring profile"
        elif _refused(profiles.entries, shape, spec.name, str(env.path)) is _REFUSED:
            # the kernel's block that is no list is said of every entry (trial 104)
            block = shape.get("kernels", {}).get(spec.name) if isinstance(shape.get("kernels"), dict) else None
            expected = "ignoring an entry" if isinstance(block, list) else "ignoring every entry of the kernel"
        else:
            continue
        _check(any(expected in str(w.message) for w in caught), f"corrupt profile: choose did not warn {expected!r}")
    show()
    verdict = _refused(profiles.save, entry, "reverse", FAKE.profile_header(), env.path)
    if verdict is _REFUSED or verdict == "kept":
        what = "refused" if verdict is _REFUSED else verdict
        _check(env.path.read_bytes() == data, f"profile changed by a save that wrote nothing ({what})")
        _check(env.bak.read_bytes() == env.good_bak, f"backup changed by a save that wrote nothing ({what})")
        return
    # a malformed entry of another problem or kernel stays (load_kernel skips it); the saved
    # problem's malformed or other-version entries give way to the saved one
    after = _refused(profiles.read, env.path, check_entries=False)
    _check(after is not _REFUSED and after, "save left an empty or unreadable profile")
    saved = ("reverse", repr(sorted(map(repr, dict(entry.problem).items()))))
    lost = _problems(shape) - _problems(after) - {saved}
    _check(not lost, f"entries lost by save: {sorted(lost)[:3]}")
    _check(saved in _problems(after), f"saved entry missing ({verdict})")
    if shape:
        _check(env.bak.read_bytes() == data, "backup is not the profile that save replaced")
    else:
        _check(env.bak.read_bytes() == env.good_bak, "good backup replaced by an empty profile")


def _fuzz_profiles(fuzz: _Fuzz, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    env = _Profiles(settings.profiles_dir())  # where `autotune show` looks

    def show() -> None:
        with _fake_device(monkeypatch):
            _cli_case(["show"], capsys)

    for n in range(COUNTS["profile"]):
        shown, data, entry = _profile_input(n, env)
        fuzz("profile", n, f"{shown} (then save N={entry.problem['N']})",
             lambda data=data, entry=entry: _profile_case(env, data, entry, show))


# --------------------------------------------------------------------------- family 1: the command line

_KERNELS = ["matmul", "correlate", "mathpath", "mul1", "reverse", "matmull", "MATMUL", "", " ", "nope",
            "../search_spaces/matmul", "mat mul", "m\u00e4tmul", "\U0001f642", "-", "matmul.yml", "matmul\t",
            "\udcff", "a" * 300, "/" + "b" * 300 + ".yaml", "/etc", "/", "/nonexistent-autotune-fuzz/x.yaml",
            "~/no-such-autotune-spec.yaml", ".", "..", "matmul/", "search_spaces/matmul.yaml"]
_SIZES = ["", " ", ",", ",,,", "0", "-1", "-64", "1", "64", "10**30", str(10**30), "9" * 5000, "1e3", "nan", "inf",
          "M=True", "N=None", "M=0", "M=-5", "M=1.5", "M=0x40", "M=1_024", "Q=5", "layout=diag", "layout=",
          "layout=row", "=5", "M==5", "M=5=6", "64x64", "1x2x3x4", "x", "64x", "0x0x0", "\u0661\u0662\u0668",
          "\U0001d7d7", "\u00b2", "\U0001f642", "M=\U0001f642", "MxNxK", "W=500,OW=600", "VW=4", "a b", "M =64", "\t",
          "M=64,M=-1", "LOG_BASE=31", "LOG_BASE=30", "P=0", "N=3", "N=" + "9" * 400, "OW=0", "64X64X64", "x64",
          "M=" + "9" * 5000, "N=2**31", "N=1e309", "OH=251,H=250"]
#: Numbers argparse accepts that are out of range, three times as likely as ones it refuses.
_NUMBERS = 3 * ["nan", "NaN", "inf", "-inf", "-1", "0", "-0", "1e309", "-1e309", "1e-309", "0.5", "2.5", str(10**30),
                str(2**32), str(2**63), "99999999999999999999", "1e3", "\u0663", "1_0"] + [
    "text", "", " ", "0x10", "--", "1,2", "5 ", "\U0001f642"]
_DEVICES = ["no-such-device-xyz", "0:0", "99:99", "", ":", "nvidia", "\U0001f642", "-1", "0:0:0", "cpu"]
_SAMPLERS = ["tpe", "random", "grid", "TPE", "cmaes", "", "gridd", "\U0001f642"]
_EXTRA = ["--bogus", "-x", "--", "-s", "-n", "--seed=", "--trials=nan", "=", "\U0001f642", "", " ", "-", "--size=,,",
          "-qq", "--device", "--storage=x", "--no-save=1", "-d", "a\nb", "--prune", "-t-1", "-n-5", "--sampler=grid"]
_GOOD_SIZES = ["64", "1024", "N=4096", "M=64,N=64,K=64", "64x32x16", "layout=col", "W=64,H=64,OW=8,OH=8", "N=100"]
#: Each command's options with their (good values, bad values); None: the two lists of _storages.
_OPTIONS: dict[str, list[tuple[str, Any]]] = {
    "run": [("-s", (_GOOD_SIZES, _SIZES)), ("-d", (_DEVICES, _DEVICES)), ("-n", (["1", "5", "40"], _NUMBERS)),
            ("-t", (["10", "0.5", "150"], _NUMBERS)), ("--sampler", (["tpe", "random", "grid"], _SAMPLERS)),
            ("--seed", (["0", "7", "123"], _NUMBERS)), ("--storage", None),
            ("--max-time-per-config", (["30", "0.5"], _NUMBERS)), ("--compile-ahead", (["0", "2"], _NUMBERS)),
            ("--prune", (["0", "1", "3"], _NUMBERS)), ("--no-isolation", ()), ("--no-save", ()), ("-q", ())],
    "bench": [("-s", (_GOOD_SIZES, _SIZES)), ("-d", (_DEVICES, _DEVICES))],
    "show": [("-d", (_DEVICES, _DEVICES))],
    "probe": [("-d", (_DEVICES, _DEVICES)), ("-n", (["1", "1000"], _NUMBERS))],
    "devices": [("--recheck", ())],
    "list": [],
}


def _cli_files(folder: Path) -> list[str]:
    """Spec paths for KERNEL arguments: two good ones, then ones that are not specs."""
    good = folder / "good"
    shutil.copytree(data_dir("kernel_templates"), good)
    mul1 = (data_dir("search_spaces") / "mul1.yaml").read_bytes()
    files = {"good/mul1.yaml": mul1, "good/\u00fcn\u00ef \U0001f642.yaml": mul1, "empty.yaml": b"",
             "binary.yaml": b"\xff\xfe\x00kernel: x\n", "list.yaml": b"- a\n- b\n", "scalar.yaml": b"just text\n",
             "broken.yaml": b"kernel: [\n\tx: }\n", "bomb.yaml": _BOMB.encode(),
             "deep.yaml": b"[" * 3000 + b"]" * 3000, "template.yaml": (good / "matmul.cl").read_bytes(),
             "notes.txt": b"kernel: x\n", "python.yaml": b"!!python/object/apply:os.system ['true']\n"}
    for name, data in files.items():
        (folder / name).write_bytes(data)
    (folder / "dir.yaml").mkdir()
    return [str(folder / name) for name in [*files, "dir.yaml", "missing.yaml", ""]]


def _storages(folder: Path) -> tuple[list[str], list[str]]:
    """--storage values that work and ones that cannot (all under ``folder``, or in memory)."""
    (folder / "junk.db").write_bytes(b"\x00not a database" * 100)
    good = [":memory:", f"sqlite:///{folder}/st/studies.db", "sqlite:///relative.db", ""]
    bad = ["sqlite:///", f"sqlite:///{folder}/junk.db", f"sqlite:///{folder}", f"sqlite:///{folder}/dir.yaml/",
           f"sqlite:///{folder}/empty.yaml", f"sqlite:///{folder}/binary.yaml", "nosuchdialect://x",
           "http://example.invalid/x", "not a url", "sqlite://", "postgresql://u@127.0.0.1:1/db",
           "mysql://u@127.0.0.1:1/db", "sqlite:///\U0001f642.db", "sqlite:///?x=1", "sqlite:///" + "s" * 300]
    return good, bad


def _cli_input(number: int, paths: list[str], storages: tuple[list[str], list[str]]) -> tuple[list[str], bool]:
    """Input ``cli#number``: (argv, whether it runs on the fake device, past device selection).

    At most two option values are bad, so that most inputs get past argparse to autotune's own checks.
    """
    rng = _rng("cli", number)
    command = rng.choice(["run"] * 6 + ["bench"] * 2 + ["show"] * 2 + ["list", "devices", "probe", "probe"])
    argv = [command]
    deep = command in ("run", "show") and rng.random() < 0.6
    if command in ("run", "bench") or (command == "show" and rng.random() < 0.7):
        good = ["matmul", "correlate", "mathpath", "mul1", "reverse", *paths[:2]]
        argv.append(rng.choice(good if rng.random() < 0.6 else rng.choice([_KERNELS, paths])))
    chosen = rng.sample(_OPTIONS[command], rng.randint(0, min(5, len(_OPTIONS[command]))))
    bad = rng.sample(range(len(chosen)), min(len(chosen), rng.choice([0, 1, 1, 1, 2])))
    for i, (flag, pools) in enumerate(chosen):
        argv.append(flag)
        if pools != ():
            pool = (pools or storages)[i in bad]
            argv.append(rng.choice(pool) if i not in bad or rng.random() < 0.9 else ",".join(rng.sample(pool, 2)))
    if command in ("run", "bench", "probe") and not deep and rng.random() < 0.5:
        argv += ["--device", "no-such-device-xyz"]
    for _ in range(rng.choice([0, 0, 0, 0, 1, 2])):
        op, at = rng.randrange(4), rng.randrange(1, len(argv) + 1)
        if op == 0 and len(argv) > 1:
            del argv[rng.randrange(1, len(argv))]
        elif op == 1:
            argv.insert(at, rng.choice(_EXTRA))
        elif op == 2 and len(argv) > 1:
            argv.insert(at, argv[rng.randrange(1, len(argv))])
        elif len(argv) > 2:
            i, j = rng.sample(range(1, len(argv)), 2)
            argv[i], argv[j] = argv[j], argv[i]
    return argv, deep


def _stop_measuring(*args: Any, **kwargs: Any) -> Any:
    """Stands in for the evaluator of a tuning run."""
    raise _Measuring("stopped where the fuzz run would start measuring")


@contextmanager
def _fake_device(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Device selection finds the fake device; a tuning run stops before its first measurement, and
    counts its valid space for 10 ms at most (then estimates it)."""
    count = space.ValidSpace.count

    def bounded(self: Any, budget_s: float = 0.5, seed: int = 0) -> Any:
        return count(self, min(budget_s, 0.01), seed)

    with monkeypatch.context() as m:
        m.setattr(devices, "select", lambda selector=None, require_build=True: (FAKE, None))
        m.setattr(tuner, "_workload", lambda *args, **kwargs: None)
        m.setattr(tuner, "_evaluator", _stop_measuring)
        m.setattr(space.ValidSpace, "count", bounded)
        yield


def _cli_case(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    """``autotune ARGV``: exit status 1 or 2 (0 for list and show), each line of stderr one of autotune's."""
    capsys.readouterr()
    try:
        status = cli.main(argv)
    except SystemExit as exc:
        status = exc.code
        _check(status == 2, f"SystemExit({status!r}) instead of a usage error (2)")
    out, err = capsys.readouterr()
    _check("Traceback" not in out + err, f"traceback printed: {_brief(err[-500:])!r}")
    _check(status in (0, 1, 2), f"exit status {status!r}")
    _check(status != 0 or argv[0] in ("list", "show"), f"exit status 0: `{argv[0]}` did real work")
    lines = [line for line in err.splitlines() if line.strip()]
    _check(status == 0 or lines, f"exit status {status} without a message")
    if status == 2:  # argparse echoes the arguments, which may hold line breaks
        lines = lines[:1]
    for line in lines:
        _check(line.startswith("autotune"), f"stderr line not from autotune (one line each): {_brief(repr(line))}")


def _cli_sweep(paths: list[str], storages: tuple[list[str], list[str]]) -> list[tuple[list[str], bool]]:
    """Every bad value of the pools once, alone on an otherwise good command line: (argv, on the fake device)."""
    kernels = ["mul1", "reverse", "mathpath", "matmul", "correlate"]
    numbers = list(dict.fromkeys(_NUMBERS))
    out: list[tuple[list[str], bool]] = []
    for i, (flag, value) in enumerate((f, v) for f in ("-n", "-t", "--seed", "--max-time-per-config",
                                                       "--compile-ahead", "--prune") for v in numbers):
        out.append((["run", kernels[i % 5], flag, value], True))
    for i, size in enumerate(_SIZES):
        out += [(["run", kernels[i % 5], "-s", size], True), (["bench", kernels[(i + 1) % 5], "-s", size], False)]
    for kernel in _KERNELS + paths:
        out += [(["run", kernel, "-q"], True), (["show", kernel], True), (["bench", kernel], False)]
    out += [(["run", "mul1", "--sampler", sampler], True) for sampler in _SAMPLERS]
    out += [(["run", "reverse", "--storage", url], True) for url in storages[0] + storages[1]]
    out += [(["probe", "-n", value], False) for value in numbers]
    for device in _DEVICES:
        out += [([command, *kernel, "-d", device], False) for command, kernel in (("probe", []), ("run", ["mul1"]),
                                                                                  ("show", []))]
    return out


def _fuzz_cli(fuzz: _Fuzz, folder: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> int:
    """The sweep, then random command lines; returns how many inputs ran on the fake device."""
    paths, storages = _cli_files(folder), _storages(folder)
    monkeypatch.setattr(devices, "list_devices", lambda: [])  # every real device command: "no OpenCL device found"
    sweep = _cli_sweep(paths, storages)
    inputs = sweep + [_cli_input(n, paths, storages) for n in range(COUNTS["cli"] - len(sweep))]
    for n, (argv, deep) in enumerate(inputs):
        def case(argv: list[str] = argv, deep: bool = deep) -> None:
            if not deep:
                return _cli_case(argv, capsys)
            with _fake_device(monkeypatch):
                return _cli_case(argv, capsys)

        origin = "sweep" if n < len(sweep) else f"random {n - len(sweep)}"
        fuzz("cli", n, f"autotune {argv!r}" + (" on the fake device" if deep else "") + f" ({origin})", case)
    return sum(deep for _, deep in inputs)


# --------------------------------------------------------------------------- the test

@pytest.mark.filterwarnings("ignore::SyntaxWarning",  # ast.parse's, for inputs such as "1if N else 0"
                            "ignore:Query string argument")  # SQLAlchemy's, for --storage sqlite:///?x=1
def test_fuzz_bad_inputs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """Every generated bad input is refused with one line, in time, and no profile or backup is lost."""
    monkeypatch.chdir(tmp_path)  # relative paths that inputs name land here
    monkeypatch.setattr(loader, "_warned", set())  # the fallback warnings given here are not other tests' business
    fuzz, start = _Fuzz(), time.perf_counter()
    monkeypatch.setenv("AUTOTUNE_HOME", str(tmp_path / "cli-home"))
    deep = _fuzz_cli(fuzz, tmp_path / "cli", monkeypatch, capsys)
    monkeypatch.setenv("AUTOTUNE_HOME", str(tmp_path / "home"))
    _fuzz_specs(fuzz, tmp_path / "specs")
    _fuzz_profiles(fuzz, monkeypatch, capsys)
    _fuzz_expressions(fuzz)
    total = sum(fuzz.counts.values())
    with capsys.disabled():
        print(f"\nfuzz: {total} inputs in {time.perf_counter() - start:.1f} s: "
              + ", ".join(f"{f} {fuzz.counts[f]} ({fuzz.seconds[f]:.1f} s, slowest {fuzz.slowest[f][0]:.2f} s)"
                       for f in COUNTS)
              + f"; {deep} CLI inputs on the fake device; {len(fuzz.failures)} distinct failures")
    assert total >= 500
    if fuzz.failures:
        pytest.fail(fuzz.report(), pytrace=False)
