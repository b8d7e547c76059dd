"""Tuning against a recorded space: Kernel Tuner cache files, the real loop, no device.

A Kernel Tuner cache file (JSON, optionally gzipped) holds ``tune_params`` and a ``cache`` of
configuration → time in ms, or an error string. Brute-forced caches hold every configuration
the kernel's restrictions allow, so here a configuration is valid exactly when the cache has
it (``InvalidConfig`` entries excepted); an error entry is a failed build or launch, which a
real run would have paid for, so it counts as measured. :func:`replay` runs
:func:`autotune.tuner.tune` with :class:`RecordedEvaluator` and reports after how many measured
configurations the best came within a target of the recorded optimum, so search strategies
can be compared on public spaces in seconds.

Example:
    >>> rec = Recorded("toy", "Toy GPU", (("X", (1, 2, 3)),), {(1,): 3.0, (2,): 1.0, (3,): "CompilationFailedConfig"})
    >>> rec.optimum_ms, rec.valid
    (1.0, 3)
"""

from __future__ import annotations

import gzip
import json
import math
import re
import statistics
import warnings
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .device import DeviceInfo
from .errors import AutotuneWarning, ProblemError, clipped, warn
from .expr import Expr
from .proposer import Sampler
from .result import Measurement, Status, is_real
from .spec import KernelSpec, LaunchStep, Parameter, Value
from .warmstart import OTHERS_LIMIT

#: Kernel Tuner's error strings, as the statuses a real run records for them.
_ERRORS = {"CompilationFailedConfig": Status.COMPILE_ERROR, "CompileFailedConfig": Status.COMPILE_ERROR,
           "RuntimeFailedConfig": Status.LAUNCH_ERROR}
_INVALID = "InvalidConfig"
_GZIP_MAGIC = b"\x1f\x8b"
UNKNOWN_DEVICE = "unknown device"  # a cache file without a device_name


@dataclass(frozen=True)
class Recorded:
    """A recorded space: parameters in key order, and each configuration's time (ms) or error."""

    name: str
    device: str
    parameters: tuple[tuple[str, tuple[Value, ...]], ...]
    outcomes: Mapping[tuple[Value, ...], float | str]
    path: Path | None = None  # the file it was read from

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(n for n, _ in self.parameters)

    @property
    def optimum_ms(self) -> float:
        return min(t for t in self.outcomes.values() if isinstance(t, float))

    @property
    def buildable(self) -> list[tuple[Value, ...]]:
        """Configurations a tuner can propose and have built (failures included)."""
        return [c for c, t in self.outcomes.items() if t != _INVALID]

    @property
    def valid(self) -> int:
        return len(self.buildable)

    def outcome(self, params: Mapping[str, Value]) -> float | str | None:
        return self.outcomes.get(tuple(params[n] for n in self.names))

    @property
    def winner(self) -> dict[str, Value]:
        """The fastest recorded configuration."""
        _, fastest = min((t, c) for c, t in self.outcomes.items() if isinstance(t, float))
        return dict(zip(self.names, fastest, strict=True))

    def adopt(self, config: Mapping[str, Value]) -> dict[str, Value] | None:
        """``config`` (another recording's) as a configuration of this space, or None where it
        lacks one of its parameters or holds a value this space does not list. It need not be
        recorded here: the tuner then starts from a recorded one next to it, as on a device."""
        if any(n not in config or config[n] not in values for n, values in self.parameters):
            return None
        return {n: config[n] for n in self.names}


def load(path: str | Path) -> Recorded:
    """Read a Kernel Tuner cache file (``.json`` or ``.json.gz``); ProblemError says what is wrong.

    Each cache entry holds its parameters' values and a ``time`` in ms, or an error string::

        {"tune_params": {"bx": [16, 32]}, "cache": {"16": {"bx": 16, "time": 1.5}}}
    """
    path = Path(path)
    raw = _read(path)
    try:
        params = _parameters(raw)
        outcomes = _outcomes(raw, params)
    except ProblemError as exc:
        raise ProblemError(f"{path}: {exc}") from None
    objective = raw.get("objective")
    if isinstance(objective, str) and objective != "time":  # trial 63: replayed by time without a word
        warn(f"{path}: the cache's objective is {objective!r}; replay minimises each entry's recorded "
             "'time', as autotune's runs do")
    name = re.sub(r"(\.json)?(\.gz)?$", "", path.name, flags=re.IGNORECASE)
    # a name of only spaces is no name (trial 37: it gave an IndexError on every replay)
    device = str(raw.get("device_name") or "").strip() or UNKNOWN_DEVICE
    return Recorded(name, device, params, outcomes, path.resolve())


def _read(path: Path) -> dict[str, Any]:
    try:
        with open(path, "rb") as f:
            data = f.read()
        # a byte-order mark is no reason to refuse a file (trial 37: Python's own hint was shown)
        text = (gzip.decompress(data) if data[:2] == _GZIP_MAGIC else data).decode("utf-8-sig")
    # an OSError, yet the file was read (trial 37: "cannot read"); corrupt data is zlib's error,
    # a file cut short an EOFError (trial 40: a traceback, and "not a JSON cache file")
    except (gzip.BadGzipFile, zlib.error, EOFError) as exc:
        raise ProblemError(f"{path}: its gzip data is damaged ({exc}); copy or download it again") from None
    except IsADirectoryError:  # (trial 123: sent to the download script)
        raise ProblemError(f"{path} is a folder; give the cache files in it, e.g. {path}/*.json.gz") from None
    except OSError as exc:
        raise ProblemError(f"cannot read {path} ({exc.strerror or exc}); give a Kernel Tuner cache "
                           "file (.json or .json.gz): `bash benchmarks/fetch_recorded_spaces.sh DIR` downloads "
                           "the README's recorded spaces from GitHub (it needs internet access)") from None
    except ValueError as exc:  # not UTF-8 (trial 93: Python's codec message alone)
        twice = data[:2] == _GZIP_MAGIC and gzip.decompress(data)[:2] == _GZIP_MAGIC
        why = "it is gzip data compressed twice; decompress it once (gunzip)" if twice else \
            f"it is not UTF-8 text ({str(exc).splitlines()[0]}), which Kernel Tuner writes; save it as UTF-8"
        raise ProblemError(f"{path} is not a JSON cache file: {why}") from None
    raw = _parse(text, path)
    if not isinstance(raw, dict) or "tune_params" not in raw or "cache" not in raw:
        t4 = isinstance(raw, dict) and "results" in raw and "schema_version" in raw  # trial 52
        lacks = [k for k in ("tune_params", "cache") if not isinstance(raw, dict) or k not in raw]
        said = f"has no {' and no '.join(repr(k) for k in lacks)} object"  # (trial 113: both, of one missing)
        raise ProblemError(f"{path} {said}{'s' if len(lacks) > 1 else ''}: not a Kernel Tuner cache file"
                           + ("; it is in Kernel Tuner's T4 results format, which replay does not read: give the "
                              "cache file of the same run (tune_kernel's cachefile=)" if t4 else ""))
    for key, what in (("tune_params", "each parameter's list of values"), ("cache", "entries by key")):
        if not isinstance(raw[key], dict):  # trial 30: it said the key was missing
            raise ProblemError(f"{path}: '{key}' is {_short(raw[key])}, not an object of {what}")
    return raw


def _parse(text: str, path: Path) -> Any:
    """The JSON document; a cache Kernel Tuner left open for appending (its last entry followed
    by a comma and no closing braces) is closed first, as Kernel Tuner does when it reads one.
    A key given twice in one object is read once, the first, with a warning (trial 37: the last
    was read silently, so a cache entry given twice lost its first, faster time)."""
    repeated: list[str] = []
    try:
        return _warn_repeated(json.loads(text, object_pairs_hook=_first_of_each(repeated)), repeated, path)
    except RecursionError:  # trial 93: a traceback
        raise ProblemError(f"{path}: its JSON nests deeper than Python's reader can follow (about 1,000 levels; "
                           "a Kernel Tuner cache nests 3): remove the deeply nested field") from None
    except ValueError as exc:
        error = exc
    left_open = text.rstrip().removesuffix(",")
    repeated.clear()
    try:
        raw = _warn_repeated(json.loads(left_open + "}\n}", object_pairs_hook=_first_of_each(repeated)),
                             repeated, path)
    except (ValueError, RecursionError):
        raw = None
    cache = raw.get("cache") if isinstance(raw, dict) else None
    if not isinstance(cache, dict):  # closed, it is no cache either (trial 33: cut short, it warned first)
        said = f" ({str(error).splitlines()[0]})" if isinstance(error, json.JSONDecodeError) else ""
        raise ProblemError(f"{path} is not a JSON cache file{said}{_why_not(text, path, error)}")
    warn(f"{path}: the cache was left open, as Kernel Tuner leaves it while a run appends to it: "
         f"{(n := len(cache))} entr{'y' if n == 1 else 'ies'} read; if that run did not finish, "
         "the optimum replays aim at is only the best it had measured")
    return raw


#: The first characters of a JSON number, or of a literal, and nothing after them but space.
_NUMBER_START = r"(-|-?(0|[1-9]\d*)(\.\d*)?([eE][+-]?\d*)?)\s*"
_LITERAL_START = r"(t(r(ue?)?)?|f(a(l(se?)?)?)?|n(u(ll?)?)?)?\s*"


def _leading_zero(text: str, pos: int) -> bool:
    """Whether the JSON error at ``pos`` is in a number written with a leading 0 (trial 101)."""
    return re.search(r"-?0\d+$", text[:pos + 1]) is not None


def _ends_mid_token(text: str, pos: int) -> bool:
    """Whether the text from the JSON error at ``pos`` is at most the start of a number (read
    from where its characters begin: trial 99, `01` is no start of one) or of a literal."""
    start = pos
    while start > 0 and text[start - 1] in "0123456789.eE+-":
        start -= 1
    return bool(re.fullmatch(_NUMBER_START, text[start:]) or re.fullmatch(_LITERAL_START, text[pos:]))


def _why_not(text: str, path: Path, error: ValueError) -> str:
    """What a text that is no JSON cache file likely is (trial 85: an empty file, a .gz name on
    a plain file and a file cut short were all "Expecting value ..."; trial 93: a comma too many
    mid-file was called cut short)."""
    if not text.strip():
        return ": it is empty; copy or download it again"
    if not isinstance(error, json.JSONDecodeError):  # trial 93: Python's own advice on long integers
        return ": it holds a number longer than Python's JSON reader takes (an integer of over 4,300 digits); remove it"
    # no bracket closes after the error: the text stops mid-document, in a token or string
    # (trial 94: at `1.` or `tru`, it was called broken), where a comma too many has some after
    # it (gzip data too, once unpacked: trial 86)
    if error.msg.startswith("Extra data"):  # trial 96: more after the JSON was called cut short
        return (f": more follows the end of its JSON, from line {error.lineno} column {error.colno} (a brace too "
                "many, or two files joined?); remove it")
    if text.lstrip().startswith("{"):
        # at most the start of a number or of true, false or null after the error: the reader ran
        # out of text (trials 96, 97: `{not json` and `{notjson` were called cut short)
        # (trial 104: or inside a \u escape, "Invalid \uXXXX escape")
        if error.msg.startswith("Unterminated") or _ends_mid_token(text, error.pos) or \
                (error.msg.startswith("Invalid \\uXXXX") and len(text.rstrip()) <= error.pos + 6):
            return ": it ends before its JSON does (cut short?); copy or download it again"
        likely = "a number that starts with 0, which JSON does not allow" if _leading_zero(text, error.pos) else \
            "a backslash escape JSON does not allow, as \\u with fewer than 4 hex digits" \
            if "escape" in error.msg else "a comma or brace too many or too few"
        return f": the JSON is broken at line {error.lineno} column {error.colno} ({likely}?); fix it there"
    if path.suffix.lower() == ".gz":
        return ": its name ends in .gz, but it is not gzip data"
    return ": give a Kernel Tuner cache file (.json or .json.gz)"


def _first_of_each(repeated: list[str]) -> Callable[[list[tuple[str, Any]]], dict[str, Any]]:
    """A JSON object hook that keeps the first of a repeated key, noting the others in ``repeated``."""
    def hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in pairs:
            if key not in out:
                out[key] = value
            elif value != out[key]:
                repeated.append(f"{key!r} ({_short(out[key])}, then {_short(value)})")
        return out
    return hook


def _warn_repeated(raw: Any, repeated: list[str], path: Path) -> Any:
    if repeated:
        warn(f"{path}: {len(repeated)} key{'s' * (len(repeated) > 1)} given twice in one object, with other "
             f"values: {', '.join(repeated[:3])}{', ...' if len(repeated) > 3 else ''}; the first is read")
    return raw


def _parameters(raw: dict[str, Any]) -> tuple[tuple[str, tuple[Value, ...]], ...]:
    """The parameters and their values, in ``tune_params_keys`` order."""
    tune_params = raw["tune_params"]
    keys = raw.get("tune_params_keys") or list(tune_params)
    if not tune_params:
        raise ProblemError("'tune_params' names no parameter: nothing to tune")
    if not isinstance(keys, list):
        raise ProblemError(f"'tune_params_keys' is {keys!r}: give a list of the parameters' names")
    repeated = sorted({str(k) for k in keys if keys.count(k) > 1})
    if repeated:
        raise ProblemError(f"'tune_params_keys' names {', '.join(repeated)} more than once")
    if left := [k for k in tune_params if k not in keys]:  # trial 37: dropped silently
        raise ProblemError(f"'tune_params' lists {', '.join(left)}, which 'tune_params_keys' leaves out; "
                           "name every parameter there, in the order of the cache's keys")
    params = []
    for k in keys:
        values = tune_params.get(k) if isinstance(k, str) else None
        if values is None:
            raise ProblemError(f"'tune_params_keys' names {k!r}, which 'tune_params' lacks")
        if not isinstance(values, list) or not values:
            raise ProblemError(f"'tune_params' gives {k} {values!r}: give a list of its values")
        listed = tuple(_value(v, k) for v in values)
        for i, v in enumerate(listed):
            if (j := listed.index(v)) < i:  # by ==: true and 1 are one value to Python (trial 37)
                twice = f"the value {_short(v)} of {k} twice" if type(listed[j]) is type(v) else \
                    f"{_short(listed[j])} and {_short(v)} for {k}, which are one value here"
                raise ProblemError(f"'tune_params' lists {twice}")
        params.append((k, listed))
    return tuple(params)


def _outcomes(raw: dict[str, Any], params: tuple[tuple[str, tuple[Value, ...]], ...]
              ) -> dict[tuple[Value, ...], float | str]:
    """Each recorded configuration's time (ms) or error string."""
    keys = [k for k, _ in params]
    outcomes: dict[tuple[Value, ...], float | str] = {}
    first: dict[tuple[Value, ...], str] = {}  # the cache key each configuration was read from
    timeless: list[str] = []  # keys whose time is a number but not positive (0, negative, NaN) or infinite
    fast: list[str] = []  # keys whose time is under FASTEST_MS
    huge: list[str] = []  # keys whose time is finite and over 1e20
    misnamed: list[str] = []  # keys that do not spell their entry's values (trial 30: a hand edit)
    unnamed: list[str] = []  # error strings Kernel Tuner does not write
    failed = 0  # numbers taken as failures (timeless, and 1e20 or more)
    for key, entry in raw["cache"].items():
        if not isinstance(entry, dict):
            raise ProblemError(f"cache entry {key!r} is {_short(entry)}, not an object of the parameters' values "
                               "and a 'time'")
        if missing := [k for k in keys if k not in entry]:
            raise ProblemError(f"cache entry {key!r} lacks a value of {', '.join(missing)}")
        config = tuple(_value(entry[k], k) for k in keys)
        if not _spells(key, config):
            misnamed.append(f"{key!r} holds {', '.join(f'{k}={v}' for k, v in zip(keys, config, strict=True))}")
        if isinstance(entry.get("time"), str) and entry["time"] not in _ERRORS and entry["time"] != _INVALID:
            unnamed.append(f"{key!r}: {entry['time']!r}")
        for (k, values), v in zip(params, config, strict=True):
            if v not in values:
                raise ProblemError(f"cache entry {key!r} has {k} = {v!r}, not one of the values "
                                   f"'tune_params' lists for it")
        if "time" not in entry:
            raise ProblemError(f"cache entry {key!r} has no 'time': {_TIME}")
        outcome = _outcome(key, entry["time"])
        failed += is_real(entry["time"]) and not _is_time(entry["time"])
        if is_real(entry["time"]) and not 0 < entry["time"] < math.inf:  # trial 104: Infinity unsaid
            timeless.append(f"{key!r}: {json.dumps(entry['time'])}")  # trial 101: the key alone read as the time
        elif _is_time(entry["time"]) and entry["time"] < FASTEST_MS:
            fast.append(f"{key!r}: {_short(entry['time'])}")
        elif is_real(entry["time"]) and 1e20 < entry["time"] < math.inf:  # past Kernel Tuner's 1e20 (trial 105)
            huge.append(f"{key!r}: {_short(entry['time'])}")
        if config in outcomes:  # two keys that spell one configuration differently ("1" and "1.0")
            if outcome != outcomes[config]:
                warn(f"cache entries {first[config]!r} and {key!r} record the same configuration, "
                     f"as {outcomes[config]!r} and {outcome!r}; replaying the first")
            continue
        outcomes[config], first[config] = outcome, key
    if not any(isinstance(t, float) for t in outcomes.values()):  # said first, with the numbers taken as failures
        why = [f"{failed} of its times {'is a number' if failed == 1 else 'are numbers'} taken as failures (not "
               "positive, not finite, or 1e20 or more: Kernel Tuner's for one)"] if failed else []
        why += [f"{_some(unnamed)} record text that is no time nor an error Kernel Tuner writes"] if unnamed else []
        raise ProblemError("it records no successful time" + (f" ({'; '.join(why)})" if why else "")
                           + ": nothing to tune against")
    if timeless:  # one bad time (a timer's rounding, a hand edit) should not refuse the whole file
        warn(f"{_record(timeless)} a time that is not a positive, finite number ({_first(timeless)}); replayed as "
             "failures")
    if fast:  # trial 104: 1e-300 ms became the optimum, and every seed 2.5e300x from it
        warn(f"{_record(fast)} a time under {FASTEST_MS:g} ms, faster than any kernel launch ({_first(fast)}): "
             "the optimum replays aim at is the fastest time; check those entries, and that the file's times are "
             "in ms (Kernel Tuner's are)")
    if huge:  # (trial 123: said with the fast ones, one message for two conditions)
        warn(f"{_record(huge)} a time over Kernel Tuner's 1e20 for a failure ({_first(huge)}): replayed as "
             "failures; check those entries, and that the file's times are in ms (Kernel Tuner's are)")
    if misnamed:
        warn(f"{_some(misnamed)}: {'its key does' if len(misnamed) == 1 else 'their keys do'} not spell "
             "the values (Kernel Tuner's key is the values in the order of 'tune_params_keys', else of "
             "'tune_params', joined by commas); the values are replayed")
    if unnamed:
        warn(f"{_some(unnamed)}: not a time nor an error Kernel Tuner records ({', '.join([*_ERRORS, _INVALID])}); "
             "replayed as failures")
    return outcomes


def _outcome(key: str, t: Any) -> float | str:
    """A cache entry's time in ms, or its error: the name of Kernel Tuner's error class
    (``CompilationFailedConfig``, ...). A time of 1e20 ms or more is a failure: Kernel Tuner
    before its error classes recorded a configuration that failed to launch as 1e20; a time that
    is not positive (0, NaN) is a failure too (the caller warns)."""
    if _is_time(t):
        return float(t)
    if isinstance(t, str) and _number(t) is None:  # an error, Kernel Tuner's or another's (warned of)
        return t
    if is_real(t):
        return str(t)
    raise ProblemError(f"cache entry {key!r} has time {json.dumps(t)[:60]}: {_TIME}")  # JSON's null, not None


#: What a cache entry's time may be.
_TIME = ("give a number of ms, or the name of Kernel Tuner's error, such as CompilationFailedConfig, "
         "RuntimeFailedConfig or InvalidConfig")


def _spells(key: str, config: tuple[Value, ...]) -> bool:
    """Whether ``key`` names ``config``: Kernel Tuner's key is the values in ``tune_params``
    order joined by commas (``1.0`` for 1 read as the same number)."""
    if key == ",".join(map(str, config)):  # a value may hold a comma itself (trial 43)
        return True
    parts = key.split(",")
    return len(parts) == len(config) and all(p.strip() == str(v) or _number(p) == v
                                             for p, v in zip(parts, config, strict=True))


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def _record(items: list[str]) -> str:
    """``3 cache entries record``: how many."""
    return f"{len(items)} cache entr{'y records' if len(items) == 1 else 'ies record'}"


def _first(items: list[str]) -> str:
    """The first three of ``items``, and ``...`` where there are more."""
    return ", ".join(items[:3]) + (", ..." if len(items) > 3 else "")


def _some(items: list[str]) -> str:
    """``3 cache entries ('a' ..., 'b' ..., ...)``: how many, and the first few."""
    shown = "; ".join(items[:2]) + ("; ..." if len(items) > 2 else "")
    return f"{len(items)} cache entr{'y' if len(items) == 1 else 'ies'} ({shown})"


def _short(v: Any) -> str:
    if isinstance(v, int) and not isinstance(v, bool) and len(digits := str(abs(v))) > 15:
        return f"{'-' * (v < 0)}{digits[0]}.{digits[1:3]}e+{len(digits) - 1} (an integer)"  # (trial 107: read as 1e39)
    text = json.dumps(v) if isinstance(v, (list, int, float, str, bool, type(None))) else repr(v)
    return clipped(text, 40)


def _value(v: Any, name: str) -> Value:
    if is_real(v) and not -2**63 <= v < 2**63:  # NaN and inf too
        raise ProblemError(f"{name} has the value {str(v)[:40]}, not a number a parameter can take")
    if isinstance(v, (bool, int, float, str)):
        return v
    raise ProblemError(f"{name} has the value {v!r}, which is not a number, string or boolean")


#: A recorded time under this (ms) is warned of: no kernel launch is that fast.
FASTEST_MS = 1e-4


def _is_time(t: Any) -> bool:
    return is_real(t) and 0 < t < 1e20  # compared, not converted: an int of 400 digits is no float


def spec_for(rec: Recorded, starts: Sequence[Mapping[str, Value]] = ()) -> KernelSpec:
    """A spec whose valid space is the recorded one; ``starts`` (configurations of this space,
    e.g. other devices' winners) are its hints, measured first.

    Each constraint says "these leading values are the start of a recorded configuration", one
    per parameter, so the lazy walk prunes a prefix as soon as no recording continues it.
    """
    valid = rec.buildable
    names = rec.names
    checks = []
    for depth in range(1, len(names) + 1):
        prefixes = frozenset(c[:depth] for c in valid)
        bound = names[:depth]
        checks.append(Expr(f"recorded({', '.join(bound)})", frozenset(bound),
                           _member(prefixes, bound)))
    one = Expr.parse(1)
    default = _middle(rec, valid)
    return KernelSpec(
        name=f"replay-{rec.name}", description=f"recorded space {rec.name} ({rec.device})",
        path=Path(rec.name), template=Path(rec.name), reference="", problem=(),
        parameters=tuple(Parameter(n, vs) for n, vs in rec.parameters), constraints=tuple(checks),
        local_memory=None, scratch=(), outputs=(), launch=(LaunchStep("recorded", (), (one,), None),),
        metrics=(), rtol=one, atol=one, baseline=tuple(default.items()), default=tuple(default.items()),
        hints=tuple(tuple((n, c[n]) for n in names) for c in starts), spec_hash="recorded")


def _member(prefixes: frozenset[tuple[Value, ...]], names: tuple[str, ...]) -> Callable[[Mapping[str, Any]], bool]:
    return lambda env: tuple(env[n] for n in names) in prefixes


def _middle(rec: Recorded, valid: Sequence[tuple[Value, ...]]) -> dict[str, Value]:
    """A mid-range default: the valid configuration whose values sit nearest the middle of
    each parameter's list (what a user who knows nothing of the device would start from)."""
    index = [{v: i for i, v in enumerate(vs)} for _, vs in rec.parameters]
    mid = [(len(vs) - 1) / 2 for _, vs in rec.parameters]
    best = min(valid, key=lambda c: (sum(abs(index[i][v] - mid[i]) for i, v in enumerate(c)), repr(c)))
    return dict(zip(rec.names, best, strict=True))


def device_for(rec: Recorded) -> DeviceInfo:
    """A stand-in device (no limits beyond the recording's) named after the recorded one."""
    return DeviceInfo(selector="replay", platform="recorded", name=rec.device, vendor="replay",
                      driver="", opencl="", device_type="GPU", compute_units=1,
                      max_work_group_size=2**31, max_work_item_sizes=(2**31,) * 3,
                      local_mem_size=2**31, global_mem_size=2**40)


class TargetReached(Exception):
    """The search came within the target: the rest of the run would tell nothing new."""


@dataclass
class RecordedEvaluator:
    """Answers from the recording: a time, or the failure it records. Keeps the order, and
    ends the run (:class:`TargetReached`) once a time is at most ``stop_at_ms``."""

    rec: Recorded
    stop_at_ms: float = 0.0
    order: list[Measurement] = field(default_factory=list)

    def evaluate(self, params: Mapping[str, Value], limit_s: float | None,
                 cutoff_ms: float | None = None, verify: bool = True) -> Measurement:
        t = self.rec.outcome(params)
        if isinstance(t, float):
            m = Measurement(Status.OK, times_ms=(t,), params=dict(params))
        else:
            m = Measurement(_ERRORS.get(str(t), Status.LAUNCH_ERROR), f"recorded: {t}", params=dict(params))
        if verify:  # the confirm step's timings are not new configurations
            self.order.append(m)
            if m.median_ms <= self.stop_at_ms:
                raise TargetReached
        return m

    def recheck(self, params: Mapping[str, Value], limit_s: float | None) -> Measurement:
        return self.evaluate(params, limit_s, verify=False)  # a recording has one outcome

    def prefetch(self, upcoming: list[dict[str, Value]]) -> None:
        pass

    def close(self) -> None:
        pass


@dataclass(frozen=True)
class ReplayResult:
    """One replayed search: the best found, and when it came within the target."""

    seed: int | None
    measured: int
    best_ms: float
    optimum_ms: float
    within: int | None  # measured configurations until within the target; None: never

    @property
    def ratio(self) -> float:
        return self.best_ms / self.optimum_ms


def replay(rec: Recorded, trials: int, sampler: Sampler = Sampler.TPE, seed: int | None = None,
           target: float = 0.05, ahead: int | None = None,
           starts: Sequence[Mapping[str, Value]] = ()) -> ReplayResult:
    """Tune against ``rec`` with the real loop (study in memory, nothing saved) until
    ``trials`` configurations are measured or the best is within ``target`` of the optimum.
    ``ahead``: --compile-ahead (None: as on a GPU, where the next candidate is chosen before
    the current one is measured). ``starts``: measured first (see :func:`spec_for`)."""
    from .tuner import TuneOptions, tune  # the tuner imports much; a replay needs it only here

    ev = RecordedEvaluator(rec, stop_at_ms=rec.optimum_ms * (1 + target))
    try:
        with warnings.catch_warnings():
            # a start not recorded here is another device's winner, not a spec's hint to fix
            # (trial 43: "fix the spec's hints[0]"); `replay` says so of each (not_recorded)
            warnings.filterwarnings("ignore", r".*'s hints\[\d+\] is not valid for its own default problem",
                                    AutotuneWarning)
            # warm_start off: a replay's other devices are its ``starts``, not the user's profiles
            # (reading those cost 30 ms a seed, for a kernel name no profile holds)
            tune(spec_for(rec, starts), TuneOptions(trials=trials, timeout_s=None, sampler=sampler, seed=seed,
                                                    storage=":memory:", save=False, prune=0, compile_ahead=ahead,
                                                    warm_start=False, explain=False),
                 evaluator=ev, info=device_for(rec))
    except TargetReached:
        pass
    return summarize(ev.order, rec.optimum_ms, target, seed)


def warm_starts(rec: Recorded, others: Sequence[Recorded]) -> tuple[list[dict[str, Value]], list[Recorded]]:
    """The winners of ``others`` that tune the same parameters as ``rec`` (the same kernel, as
    far as a recording tells) and fit its space, and the recordings they come from: at most
    ``warmstart.OTHERS_LIMIT``, those whose device name starts with the same word (the vendor)
    first, then by name, as ``run`` ranks other devices' profiles. A recording of ``rec``'s own
    device is left out: its winner would be the answer (:func:`unusable` says why one is)."""
    vendor = rec.device.split()[0]
    starts: list[dict[str, Value]] = []
    used: list[Recorded] = []
    for other in sorted(others, key=lambda o: (o.device.split()[0] != vendor, o.name)):
        c = rec.adopt(other.winner) if unusable(rec, other) is None else None
        if c is not None and c not in starts and len(starts) < OTHERS_LIMIT:
            starts.append(c)
            used.append(other)
    return starts, used


def not_recorded(rec: Recorded, start: Mapping[str, Value]) -> bool:
    """Whether a start (another recording's winner, adopted) is not a configuration ``rec``
    recorded as built: the tuner measures a recorded one a parameter away instead."""
    return rec.outcome(start) in (None, _INVALID)


def recorded_beside(rec: Recorded, start: Mapping[str, Value]) -> bool:
    """Whether a configuration one parameter from ``start`` is recorded as built: the one the
    tuner measures where ``start`` is not (:func:`not_recorded`); without one, the start is
    dropped (trial 85: said to be measured "one parameter away" all the same)."""
    return any(v != start[name] and rec.outcome({**start, name: v}) not in (None, _INVALID)
               for name, values in rec.parameters for v in values)


def unusable(rec: Recorded, other: Recorded) -> str | None:
    """Why ``other``'s winner cannot start a replay of ``rec``; None when it can."""
    if set(other.names) != set(rec.names):  # a recording says no more of its kernel
        return "it tunes other parameters"
    if (other.path == rec.path) if rec.path is not None and other.path is not None else other.name == rec.name:
        return "the recording being replayed"
    if other.device == rec.device and rec.device != UNKNOWN_DEVICE:
        return "a recording of the same device, whose winner would be the answer"
    # trial 85: a copy of an unnamed device's recording gave the answer (named ones are told apart above)
    if UNKNOWN_DEVICE in (rec.device, other.device) and other.outcomes == rec.outcomes:
        return "the same recording as the one replayed (a copy), whose winner would be the answer"
    if (start := rec.adopt(other.winner)) is None:
        return "its winner holds a value this space does not list"
    if not_recorded(rec, start) and not recorded_beside(rec, start):  # trial 86: announced, then dropped
        return ("its winner is not recorded here (it did not build, or was not measured), nor is any "
                "configuration one parameter away")
    return None


def summarize(order: Sequence[Measurement], optimum_ms: float, target: float,
              seed: int | None = None) -> ReplayResult:
    best, within = math.inf, None
    for i, m in enumerate(order, 1):
        best = min(best, m.median_ms)
        if within is None and best <= optimum_ms * (1 + target):
            within = i
    return ReplayResult(seed, len(order), best, optimum_ms, within)


@dataclass(frozen=True)
class Summary:
    """Replays of one space over several seeds."""

    results: tuple[ReplayResult, ...]
    target: float

    def median_within(self) -> float:
        """Median measured configurations to the target (never = infinity)."""
        return statistics.median(r.within if r.within is not None else math.inf for r in self.results)

    def share_within(self, budget: int) -> float:
        return sum(1 for r in self.results if r.within is not None and r.within <= budget) / len(self.results)


def replay_seeds(rec: Recorded, trials: int, seeds: Sequence[int], sampler: Sampler = Sampler.TPE,
                 target: float = 0.05, each: Callable[[ReplayResult], None] | None = None,
                 ahead: int | None = None, starts: Sequence[Mapping[str, Value]] = ()) -> Summary:
    out = []
    for s in seeds:
        r = replay(rec, trials, sampler, s, target, ahead, starts)
        out.append(r)
        if each is not None:
            each(r)
    return Summary(tuple(out), target)

