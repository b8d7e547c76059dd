"""Per-device YAML profiles: read, merge, locked atomic write, entries ranked by problem.

A profile file ``<device-slug>.yaml`` holds the device's facts and, per kernel, a list of
entries (one per problem). Writing takes a file lock, re-reads, merges, keeps a ``.bak`` of
the previous file and replaces it atomically, so concurrent runs on one device never lose
each other's results. A corrupt profile is reported with its file and line, never replaced.

Example:
    >>> e = Entry(problem={"N": 64}, params={"TS": 8}, build_flags=(), time_ms=1.0,
    ...           throughput={}, trials=3, tuned_at="2026-11-21T00:00:00Z", spec_hash="x")
    >>> doc, verdict = merge({}, "k", e)
    >>> verdict, len(doc["kernels"]["k"])
    ('added', 1)
"""

from __future__ import annotations

import contextlib
import errno
import glob
import math
import os
import pickle
import re
import shutil
import stat
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml
from filelock import FileLock, Timeout

from . import settings, stops
from .errors import ProfileError, SaveStopped, clipped, warn
from .resources import data_dir
from .result import is_real
from .spec import BUILTIN_FILE, problem_label
from .yamlload import load_bytes, read_yaml, syntax_error, unquoted

#: A field of an entry that has no default (Entry.from_yaml).
_REQUIRED = object()


class NotAnEntry(ProfileError):
    """A profile's entry that is no mapping at all (``- 5``), or a kernel's entries that are no
    list (``mul1: 5``, :class:`NotAList`): no run of a problem replaces it."""


class NotAList(NotAnEntry):
    """A kernel's entries that are no list (``mul1: 5``): every entry of that kernel is hidden."""


@dataclass(frozen=True)
class Entry:
    """One result for a kernel and problem: the best verified configuration of a tuning run,
    or (``picked``) the fastest of the device's tuned configurations, timed there at first use
    by ``load_kernel``; a tuning run's entry always replaces a picked one."""

    problem: Mapping[str, Any]
    params: Mapping[str, Any]
    build_flags: tuple[str, ...]
    time_ms: float
    throughput: Mapping[str, float]
    trials: int
    tuned_at: str
    spec_hash: str
    partial: bool = False
    baseline_ms: float | None = None
    spread_ms: tuple[float, float] | None = None
    error: float | None = None
    tolerance_used: float | None = None
    picked: bool = False
    extra: Mapping[str, Any] = field(default_factory=dict)
    study: str | None = None  # the study's identity (see record.study_key); None: kept in memory
    #: The device it was measured on (its :data:`SAME_DEVICE` facts): the entry's own record,
    #: written where the profile's device block came to name another device (a pick or run on
    #: another machine rewrote the block), else the block's; None until it is saved.
    device: Mapping[str, Any] | None = None
    #: The spec file that tuned it (KernelSpec.file_id), to tell another spec of the kernel's
    #: name from another version of this one; None: not recorded (written before it was).
    spec_file: str | None = None

    def to_yaml(self) -> dict[str, Any]:
        d = asdict(self)
        d["problem"], d["params"] = dict(self.problem), dict(self.params)
        d["build_flags"] = list(self.build_flags)
        d["throughput"] = {k: float(v) for k, v in self.throughput.items()}
        d["spread_ms"] = list(self.spread_ms) if self.spread_ms else None
        d["device"] = dict(self.device) if self.device else None  # merge drops the block's own
        if not self.extra:
            d.pop("extra")
        if not self.picked:
            d.pop("picked")
        return {k: v for k, v in d.items() if v is not None}

    @classmethod
    def from_yaml(cls, raw: Mapping[str, Any], where: str, header: Any = None) -> Entry:
        """The entry ``raw`` of a profile whose device block is ``header``."""
        if not isinstance(raw, Mapping):
            raise NotAnEntry(f"{where}: {clipped(repr(raw), 40)} is no entry (an entry is a mapping of problem, "
                             "params, time_ms, spec_hash and more); fix or delete that entry")
        problem = raw.get("problem")
        if isinstance(problem, Mapping):  # trial 95: an index alone did not find it among many
            where += f" ({problem_label(problem)})"
        missing = [k for k in ("problem", "params", "time_ms", "spec_hash") if k not in raw]
        if missing:
            raise ProfileError(f"{where}: entry lacks {', '.join(missing)}; fix or delete that entry")

        def get(key: str, convert: Callable[[Any], Any], expected: str, default: Any = _REQUIRED) -> Any:
            value = raw.get(key)
            try:
                if value is None and default is not _REQUIRED:
                    return default
                return convert(value)  # a required field's None fails here
            except (TypeError, ValueError, OverflowError):  # trial 95: Python's words, no field named
                raise ProfileError(f"{where}: malformed entry ({key} is {clipped(repr(value), 40)}, not "
                                   f"{expected}{_as_text(value, convert)}); fix or delete that entry") from None

        made = cls(
            problem=get("problem", _mapping, "a mapping of problem keys to values"),
            params=get("params", _mapping, "a mapping of parameter names to values"),
            build_flags=get("build_flags", _flags, "a list of flags as text", ()),
            # trial 31: `time_ms: .nan` (or -5) was listed and used as a tuned time
            time_ms=get("time_ms", _positive, "a positive number of ms"),
            throughput=get("throughput", lambda v: {str(k): _finite(x) for k, x in _mapping(v).items()},
                           "a mapping of metric names to finite numbers of 0 or more", {}),
            trials=get("trials", _whole, "a whole number of 0 or more", 0),
            tuned_at=str(raw.get("tuned_at", "")),
            spec_hash=get("spec_hash", _text, "text"),
            partial=get("partial", _boolean, "true or false", False),
            baseline_ms=get("baseline_ms", _positive, "a positive number of ms", None),
            spread_ms=get("spread_ms", _pair, "a list of two positive numbers of ms, the least first", None) or None,
            error=get("error", _finite, "a finite number of 0 or more", None),
            # max_error (a relative error, huge near zero) was replaced by this: not carried
            tolerance_used=get("tolerance_used", _finite, "a finite number of 0 or more", None),
            picked=get("picked", _boolean, "true or false", False),
            extra=get("extra", _mapping, "a mapping", {}),
            study=str(raw["study"]) if raw.get("study") is not None else None,
            # an entry's own device that is no mapping is no fact (trial 105: taken as the header's)
            device=_device_facts(get("device", _mapping, "a mapping of the device's facts", None) or header),
            spec_file=str(raw["spec_file"]) if raw.get("spec_file") is not None else None,
        )
        return made


@dataclass(frozen=True)
class Seen:
    """What the run whose entry is saved knows of an earlier entry's configuration (see
    :func:`merge`): whether its study measured it (None: cannot tell, taken as measured), and
    whether the run found it, another configuration than its best, slower than its best (timed
    beside it, or measured slower; of one configuration's two times the faster stays)."""

    studied: Callable[[Entry], bool] | None = None
    beaten: Callable[[Entry], bool] | None = None


def _device_facts(header: Any) -> dict[str, Any] | None:
    """The :data:`SAME_DEVICE` facts a device block holds (None: it holds none)."""
    facts = {k: header[k] for k in SAME_DEVICE if k in header} if isinstance(header, Mapping) else {}
    return facts or None


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError(f"expected text, got {value!r}")
    return value


# An entry's fields, read strictly (trial 97: `build_flags: "-O2"` was read as its characters,
# `time_ms: true` as 1 ms, `trials: 1.7` as 1, `partial: 'no'` as true)
def _flags(value: Any) -> tuple[str, ...]:
    if not isinstance(value, (list, tuple)):
        raise TypeError(value)
    return tuple(_text(f) for f in value)


def _number(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(value)
    return float(value)


def _finite(value: Any) -> float:
    """A finite number of 0 or more (trial 99: `spread_ms: [.nan, .inf]` was read, and show
    --json wrote NaN, which strict JSON readers refuse)."""
    if not (math.isfinite(number := _number(value)) and number >= 0):
        raise ValueError(value)
    return number


def _positive(value: Any) -> float:
    if not _finite(value) > 0:
        raise ValueError(value)
    return float(value)


def _whole(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != int(value) \
            or not 0 <= value < 2**63:  # trial 99: 400 digits of trials were shown as they were
        raise TypeError(value)
    return int(value)


def _boolean(value: Any) -> bool:
    if not isinstance(value, bool):
        raise TypeError(value)
    return value


def _pair(value: Any) -> tuple[float, float]:
    if not isinstance(value, (list, tuple)) or len(value) != 2 or not _positive(value[0]) <= _positive(value[1]):
        raise TypeError(value)  # trial 101: [2.0, 1.0] was read
    return float(value[0]), float(value[1])


def _as_text(value: Any, convert: Callable[[Any], Any]) -> str:
    """Why a number reads as text, where it does (trial 101: `1.0e308`, text to YAML 1.1; trial
    102: the advice was given for '12', nan and inf too, and 1e+3 is text as well; trial 104:
    told to unquote a quoted '1.5e+3' as though it were unquoted, to unquote full-width digits,
    and to unquote '-5', no positive number either). ``convert``: the field's check."""
    try:
        number = float(value) if isinstance(value, str) else math.nan
    except ValueError:
        return ""
    if not math.isfinite(number):
        return ""
    if stray := next((c for c in value if not c.isascii()), None):  # trial 105: a no-break space blamed digits
        what = "a digit" if stray.isdigit() else "a space" if stray.isspace() else "a character"
        return f" (it holds {what} that is not ASCII, U+{ord(stray):04X}: write the number with 0-9 alone)"
    bare = unquoted(value)  # what the same characters are without quotes (finite: no ValueError)
    if not is_real(bare):
        return " (YAML reads it as text: write it with a point and a signed exponent, such as 1.0e+3)"
    try:
        convert(bare)
    except (TypeError, ValueError, OverflowError):
        return f" (text, in quotes; and without them, {bare} is not that either)"
    return " (text, in quotes: write it without them)"


def path_for(slug: str, folder: Path) -> Path:
    return folder / f"{slug}.yaml"


def slug_named(selector: str) -> str:
    """The profile slug (or part of one) that ``-d`` names, given a profile's file name too
    (trials 95, 97: `-d nvidia-corporation-h200.yaml`, in any case).

    Example:
        >>> slug_named("NVIDIA-Corporation-H200.YAML"), slug_named("h200")
        ('NVIDIA-Corporation-H200', 'h200')
    """
    return re.sub(r"\.yaml$", "", selector, flags=re.IGNORECASE)


def read(path: Path, check_entries: bool = True) -> dict[str, Any]:
    """The profile document at ``path`` ({} if absent); ProfileError naming file:line if broken.

    ``check_entries=False`` checks the document's shape but not each entry's fields: readers
    that skip a malformed entry (:func:`entries_in` with ``on_error``) still use the others.
    """
    try:
        present = path.exists()
    except OSError as exc:  # a folder this user cannot enter (trial 79: a site's, 0700): a traceback
        raise ProfileError(f"{path} cannot be read ({exc.strerror}): its folder is closed to you") from None
    if not present:
        # the nearest folder above that exists (trial 44: AUTOTUNE_HOME a file, two levels up)
        above = next((a for a in path.parents if a.exists()), None)
        if above is not None and not above.is_dir():  # trial 31: show said "no tuned entries"
            if not path.is_relative_to(settings.home()):  # trial 82: a site folder's was told of AUTOTUNE_HOME
                raise ProfileError(f"{above} is not a folder, so no profiles can be read from it; name a folder of "
                                   "profiles in $AUTOTUNE_SITE_PROFILES")
            raise ProfileError(f"{above} is not a folder, and profiles are kept in it; move it aside "
                               "(a run makes the folder), or set AUTOTUNE_HOME to another folder")
        return {}
    if path.is_symlink() and not path.resolve().is_file():  # /dev/null: it reads empty, takes nothing
        raise ProfileError(f"{path} is a link to {path.resolve()}, not to a file; remove the link (rm {path}) "
                           "and run again, or link it to a profile; autotune will not write through it")
    key = (str(path.absolute()), check_entries)
    try:
        data = path.read_bytes()
    except OSError:
        data = None  # _parse says why
    cached = _READ.get(key)
    if data is not None and cached is not None and cached[0] == data:
        return pickle.loads(cached[1])  # a copy: callers may change what they get
    doc = _parse(path, check_entries, data)
    if data is not None and doc:
        with _READ_LOCK:
            _READ[key] = (data, pickle.dumps(doc))
    return doc


#: The profiles read, by path: the file's bytes and the document they gave, pickled. A file is
#: read each time (a copy of its bytes costs microseconds) and parsed again only where they
#: changed: load_kernel reads the profiles it looks in at each call, and an application that
#: loaded kernels in a loop parsed and checked a profile of 330 entries three times a call (0.4 s
#: a call, trial 47). A file's time and size would not do: an edit in place within a clock
#: tick that keeps the size would go unseen.
_READ: dict[tuple[str, bool], tuple[bytes, bytes]] = {}
_READ_LOCK = threading.Lock()


_CONFLICT = re.compile(rb"^(<{7}|={7}|>{7})(?: |\r?$)", re.MULTILINE)


def _conflict_line(data: bytes | None) -> int | None:
    """The line of the first merge-conflict marker in ``data``, if any (trial 72: a git pull's
    conflict was called a corrupt profile, with advice to restore a .bak that is neither side)."""
    data = data or b""
    found = _CONFLICT.search(data)
    return None if found is None else data.count(b"\n", 0, found.start()) + 1


def _parse(path: Path, check_entries: bool, data: bytes | None) -> dict[str, Any]:
    """The profile document at ``path``, checked (see :func:`read`): from ``data``, the bytes
    read from it (trial 48: read again, a file replaced in between cached one version's document
    under the other's bytes), or, where those could not be read, the file's own error."""
    try:
        doc = read_yaml(path, ProfileError) if data is None else load_bytes(data, path, ProfileError)
    except yaml.YAMLError as exc:
        if (conflict := _conflict_line(data)) is not None:
            raise ProfileError(
                f"{path}:{conflict}: an unresolved merge conflict (git's <<<<<<< ======= >>>>>>> lines); keep "
                "both sides' entries and delete those lines, or save each side (git show :2:PATH > ours.yaml; git "
                "show :3:PATH > theirs.yaml) and merge them with `python3 benchmarks/merge_profile.py theirs.yaml "
                "ours.yaml`, then copy ours.yaml over it") from None
        where, problem = syntax_error(exc, path)
        raise ProfileError(
            f"{where}: corrupt profile ({problem}); fix it by hand or move it away "
            f"(the previous version, if any, is {path.name}.bak); autotune will not overwrite it"
        ) from None
    if doc is None:
        backup = Path(f"{path}.bak")
        if backup.is_file() and backup.stat().st_size:  # emptied, not made empty: say so, keep both
            raise ProfileError(f"{path} is empty, but {backup.name} holds the profile before the last "
                               f"save: restore it (cp {backup} {path}), or remove both to start afresh; "
                               "autotune will not overwrite it")
        return {}
    # `kernels:` with nothing under it is no kernels, as a profile without the key (trial 95)
    if not isinstance(doc, dict) or not isinstance(doc.get("kernels") or {}, dict):
        raise ProfileError(
            f"{path}: not a profile (expected a mapping with 'device' and 'kernels'); "
            "fix it or move it away; autotune will not overwrite it"
        )
    _check_device_block(doc.get("device"), path)
    _check_keys(doc, path)
    for kernel, entries in (doc.get("kernels") or {}).items():
        if not isinstance(kernel, str):  # (an entry that is no mapping is one malformed entry, below)
            raise ProfileError(f"{path}: kernels: {clipped(repr(kernel), 40)} is no kernel name (a name is text); "
                               "fix it or move the profile away; autotune will not overwrite it")
        if entries is None:  # all its entries deleted by hand, the name left (trial 99)
            doc["kernels"][kernel] = []
        # a block that is no list is that kernel's fault (entries() says it), not its neighbours'
        for i, raw in enumerate(entries if isinstance(entries, list) else ()):
            if check_entries:  # one that is no mapping is one malformed entry (trial 82: the whole profile)
                Entry.from_yaml(raw, f"{path}: kernels.{kernel}[{i}]")
    return doc


def _check_keys(doc: Mapping[Any, Any], path: Path) -> None:
    """ProfileError for a top-level key that is a misspelt ``kernels`` or ``device`` (trial 111:
    `kernel:` hid every entry under it without a word); other keys are the user's notes, kept."""
    for key in doc:
        # in any case (trial 114: KERNELS) or one letter off, where the real key is missing: a key
        # of the user's own beside it (devices: [A100], kernels_old) is kept (trial 115)
        # (trial 117: nor one whose value is no block at all, such as devices: [A100, H200])
        near = next((k for k in ("kernels", "device") if k not in doc and _one_off(str(key).lower(), k)
                     and isinstance(doc[key], dict | None)), None)
        if near:
            raise ProfileError(f"{path}: {clipped(repr(key), 40)} is no profile key: did you mean {near!r}? "
                               f"(autotune reads '{near}:' only); fix it; autotune will not overwrite it")


def _one_off(a: str, b: str) -> bool:
    """Whether ``a`` is ``b``, or ``b`` with one letter added, left out, changed or two swapped.

    >>> [_one_off(w, "kernels") for w in ("kernels", "kernel", "kernals", "kernesl", "kernels_1")]
    [True, True, True, True, False]
    """
    if a == b:
        return True
    if len(a) == len(b):
        diff = [i for i in range(len(a)) if a[i] != b[i]]
        return len(diff) == 1 or len(diff) == 2 and diff[1] == diff[0] + 1 and a[diff[0]] == b[diff[1]] \
            and a[diff[1]] == b[diff[0]]
    short, long_ = sorted((a, b), key=len)
    return len(long_) - len(short) == 1 and any(long_[:i] + long_[i + 1:] == short for i in range(len(long_)))


def _check_device_block(block: Any, path: Path) -> None:
    """ProfileError where the device block is not a mapping (trial 31: a hand-edited `device:
    AMD EPYC` crashed run, bench and load_kernel when they saved). Its ceilings are checked by
    their readers and by :func:`save_ceilings`: a typo there must not hide the entries (trial 97:
    load_kernel ignored every tuned entry of the profile)."""
    if block is not None and not isinstance(block, dict):
        raise ProfileError(f"{path}: device: expected a mapping of the device's facts (name, device_type, "
                           f"compute_units, ...), got {block!r}; fix it, or delete the block: the next save "
                           "writes it; autotune will not overwrite it")


def _ceilings_checked(doc: Mapping[str, Any], path: Path) -> Mapping[str, Any]:
    """``doc``; ProfileError where its device block's ceilings are not a mapping, to merge into."""
    ceilings = (doc.get("device") or {}).get("ceilings")
    if ceilings is not None and not isinstance(ceilings, dict):
        raise ProfileError(f"{path}: device.ceilings: expected a mapping of ceiling names to values, got "
                           f"{ceilings!r}; fix it, or delete it: `autotune bench` measures them again; "
                           "autotune will not overwrite it")
    return doc


def entries(doc: Mapping[str, Any], kernel: str, where: str = "profile",
            on_error: Callable[[ProfileError], None] | None = None) -> list[Entry]:
    """``kernel``'s entries in ``doc``; a malformed one raises ProfileError, or with ``on_error``
    goes there and is left out, so one bad field hides only its entry."""
    out: list[Entry] = []
    try:
        block = kernel_block(doc, kernel, where)
    except ProfileError as exc:
        if on_error is None:
            raise
        on_error(exc)
        return out
    for i, raw in enumerate(block):
        try:
            out.append(Entry.from_yaml(raw, f"{where}: kernels.{kernel}[{i}]", doc.get("device")))
        except ProfileError as exc:
            if on_error is None:
                raise
            on_error(exc)
    return out


def kernel_block(doc: Mapping[str, Any], kernel: str, where: str) -> list[Any]:
    """``kernel``'s list of entries in ``doc`` ([] where it has none); ProfileError where it is
    no list (trial 99: `mul1: 5` made every kernel's entries in the profile unreadable)."""
    block = (doc.get("kernels") or {}).get(kernel)
    if block is not None and not isinstance(block, list):
        raise NotAList(f"{where}: kernels.{kernel} is {clipped(repr(block), 40)}, not a list of entries; write "
                         f"each entry under it as a list item ('- problem: ...'), or delete '{kernel}:' and "
                         "what it holds; autotune will not overwrite it")
    return block or []


def merge(doc: Mapping[str, Any], kernel: str, entry: Entry, device: Mapping[str, Any] | None = None,
          usable: Callable[[Entry], bool] | None = None,
          seen: Seen | None = None, edited: Callable[[Entry], bool] | None = None,
          where: str = "profile") -> tuple[dict[str, Any], str]:
    """Merge ``entry`` into a profile document (pure).

    Returns the new document and the verdict: ``added``, ``added beside`` a tuning run's entry
    of another version of the spec (``entry`` is a first-use pick: the two are kept, each used
    by its own version, so reverting a template edit brings the tuned one back), ``replaced``
    (better, a later first-use pick over an earlier one, the same study's and ``seen.studied``: its
    configuration is among those the study that found ``entry`` measured, or ``seen.beaten``: the
    run found it slower than ``entry``), ``replaced an entry (a first-use pick) …
    with another version of the spec`` (its template, reference or space changed) or ``with another
    spec of this kernel's name``, ``replaced an entry … not in the
    spec's space`` (not ``usable``: edited by hand, say), ``replaced an entry measured on …``
    (another device: ``entry`` is a tuning run's), or ``kept`` (the existing one is
    better, or ``entry`` is a first-use pick and the existing one a usable tuning run's); then
    what :func:`_tidy` removed, if anything. A pick is ``added beside an entry edited by hand``
    where a tuning run's entry is ``edited`` (its configuration is not of the spec's space): that
    entry stays for a person to fix, as a malformed one does (trial 99: replaced, the edit left
    in the .bak only).
    """
    new = _rehome(doc, device)
    kernel_block(new, kernel, where)  # no list: a person's to fix (``where``: the profile's path)
    items = new["kernels"].setdefault(kernel, [])
    here, tidied = _tidy(items, kernel, entry, edited)
    left = _left_for_a_person(here, entry, edited)
    mine = [i for i, old in here.items() if old.spec_hash == entry.spec_hash and i not in left]
    others = {id(items[i]) for i in here if i not in mine}  # before any is replaced
    if mine:
        verdict = _merge_into(items, mine[0], here[mine[0]], entry, usable, seen or Seen())
    elif left:
        items.append(entry.to_yaml())
        verdict = "added beside an entry edited by hand"
    elif entry.picked and any(not old.picked for old in here.values()):
        items.append(entry.to_yaml())
        verdict = f"added beside the entry tuned for {_whose(next(o for o in here.values() if not o.picked), entry)}"
    elif here:  # said: it may be another spec of this name's work
        first = min(here)
        items[first] = entry.to_yaml()
        old = here[first]
        made = "a first-use pick made" if old.picked else "an entry tuned"  # trial 122: a pick was "tuned"
        verdict = f"replaced {made} {old.tuned_at or 'earlier'} with {_whose(old, entry)}"
        if not entry.picked and old.time_ms < entry.time_ms:  # (trial 110: a 3-trial check run after a comment edit)
            verdict += (f", {old.time_ms:.4g} ms after {old.trials} trials, faster than this one: the profile's .bak "
                        "keeps it until the next save")
    else:
        items.append(entry.to_yaml())
        verdict = "added"
    if not entry.picked and verdict.startswith(("added", "replaced")):
        # a tuning run's entry supersedes every other version's for its problem, picks included
        items[:] = [raw for raw in items if id(raw) not in others]
    items.sort(key=_order)
    _own_device(items, new["device"])
    return new, "; ".join([verdict, *tidied])


def _whose(old: Entry, entry: Entry) -> str:
    """Which spec ``old``, an entry of another spec hash, came from, as a verdict says it: another
    spec file of the kernel's name where both record theirs and they differ (trial 122: such a
    file's pick was said to be "another version of the spec"), else another version of it."""
    if old.spec_file and entry.spec_file and old.spec_file != entry.spec_file:
        return f"another spec of this kernel's name ({_spec_file(old.spec_file)})"
    return "another version of the spec"


def _spec_file(spec_file: str) -> str:
    return "autotune's own spec" if spec_file == BUILTIN_FILE else spec_file


def _order(raw: Any) -> list[str]:
    problem = raw.get("problem") if isinstance(raw, dict) else None
    return sorted(map(str, problem.items())) if isinstance(problem, dict) else []


def _left_for_a_person(here: Mapping[int, Entry], entry: Entry, edited: Callable[[Entry], bool] | None) -> set[int]:
    """The entries among ``here`` that the pick ``entry`` leaves as they are: tuned, and edited
    out of the spec's space (see :func:`merge`)."""
    if not entry.picked or edited is None:
        return set()
    return {i for i, old in here.items() if old.spec_hash == entry.spec_hash and not old.picked and edited(old)}


def _tidy(items: list[dict[str, Any]], kernel: str, entry: Entry,
          edited: Callable[[Entry], bool] | None = None) -> tuple[dict[int, Entry], list[str]]:
    """Remove the hand edits among the entries of ``entry``'s problem: malformed ones (load_kernel
    skips them; a tuning run's ``entry`` only) and copies of its version's entry (load_kernel uses
    one; the fastest stays; a pick leaves those ``edited``).
    Returns that problem's entries left, by index, and what was removed, in words."""
    here, broken = _same_problem(items, kernel, entry.problem)
    if entry.picked:  # a pick never timed a hand-edited entry's configuration: left for a person to
        broken = []  # fix (trial 72: a tuned entry with a mistyped time gave way to a 4.4x slower pick)
    left = _left_for_a_person(here, entry, edited)
    copies = sorted((i for i, old in here.items() if old.spec_hash == entry.spec_hash and i not in left),
                    key=lambda i: here[i].time_ms)
    if not broken and len(copies) < 2:
        return here, []
    drop = {id(raw) for raw, _ in broken} | {id(items[i]) for i in copies[1:]}
    items[:] = [raw for raw in items if id(raw) not in drop]
    # each named (trial 86: of two, the second went unsaid)
    said = [f"removed a malformed entry for its problem ({why})" for _, why in broken]
    if len(copies) > 1:
        said.append(f"removed {len(copies) - 1} more entr{'y' if len(copies) == 2 else 'ies'} of its problem")
    return _same_problem(items, kernel, entry.problem)[0], said


def _same_problem(items: list[dict[str, Any]], kernel: str, problem: Mapping[str, Any]
                  ) -> tuple[dict[int, Entry], list[tuple[dict[str, Any], str]]]:
    """The entries of ``problem`` among ``items`` by index, and those of its entries that are
    malformed (edited by hand, say) with what is wrong with each."""
    here, broken = {}, []
    for i, raw in enumerate(items):
        if not isinstance(raw, dict) or raw.get("problem") != dict(problem):  # no entry: a person's to fix
            continue
        try:
            here[i] = Entry.from_yaml(raw, f"kernels.{kernel}[{i}]")
        except ProfileError as exc:
            broken.append((raw, str(exc).removesuffix("; fix or delete that entry")))
    return here, broken


def _merge_into(items: list[dict[str, Any]], i: int, old: Entry, entry: Entry,
                usable: Callable[[Entry], bool] | None, seen: Seen) -> str:
    """Merge ``entry`` over ``old``, ``items[i]``, an entry of the same problem and spec version."""
    # a choice among tuned configurations never displaces a tuned entry
    if entry.picked and not old.picked and (usable is None or usable(old)):
        return "kept"
    if usable is not None and not usable(old):  # load_kernel skips it: it must not block results
        items[i] = entry.to_yaml()
        return "replaced an entry whose configuration is not in the spec's space"
    # a time that is not a positive number (edited by hand, say) must not shut out every result
    sound = math.isfinite(old.time_ms) and old.time_ms > 0
    better = entry.time_ms < old.time_ms or not sound
    # a stopped run's best, timed once, does not displace the winner a finished run of the same
    # study confirmed (trial 57: a CI job's SIGTERM replaced it with a lucky time); the next
    # finished run times both again
    if entry.partial and not old.partial and not old.picked and sound and old.study is not None \
            and old.study == entry.study:
        better = False
    # a finished run's winner replaces any earlier run's of the same study, slower on paper
    # or not: it resumed that study and timed its leaders again, the earlier winner among
    # them, where the stopped run's best was timed once and a finished one's at another
    # moment (on a noisy device, a lucky time kept over the run's own evidence)
    # (a study of the same name that never measured the old winner is not that study: its
    # database was moved aside, or an older copy restored, and its baseline replaced a tuned
    # entry 19x faster, trial 26)
    resumed = (not entry.partial and old.study is not None and old.study == entry.study
               and (seen.studied is None or seen.studied(old)))
    # the same where the run found the entry's configuration, another than its best, slower than
    # its best, whatever study found it: measured at one moment (trials 96, 97)
    resumed = resumed or (not entry.partial and seen.beaten is not None and seen.beaten(old))
    # a later pick timed the earlier one's configuration beside those tuned since (loader)
    renewed = old.picked and entry.picked and entry.tuned_at > old.tuned_at
    if better or (old.picked and not entry.picked) or resumed or renewed:
        items[i] = entry.to_yaml()
        return "replaced"
    # another device's time says nothing of this one (trial 31: a copied profile's entry, "faster"
    # than any run here, could not be replaced by the run its own warning named); merge has
    # dropped the records of this device's entries, so a record names another device
    if old.device is not None and not entry.picked:
        items[i] = entry.to_yaml()
        return f"replaced an entry measured on {described(old.device)}"
    if entry.trials > old.trials and entry.study == old.study:  # the study measured more (a stopped run)
        items[i] = dict(items[i], trials=entry.trials)
        return "kept (trial count updated)"
    return "kept"


#: What a profile's device block must share with the device its entries are used on: a profile
#: is named by vendor and model only, and a copied or shared file may come from another device.
SAME_DEVICE = ("name", "device_type", "compute_units")


def written_for_another(header: Any, mine: Mapping[str, Any]) -> str | None:
    """The device a profile's block (``header``) describes where it is not ``mine``, in words;
    None where it is (or says nothing)."""
    if isinstance(header, Mapping) and any(k in header and header[k] != mine.get(k) for k in SAME_DEVICE):
        return described(header)
    return None


def described(header: Mapping[str, Any]) -> str:
    return f"{header.get('name')} ({header.get('device_type')}, {header.get('compute_units')} compute units)"


def _rehome(doc: Mapping[str, Any], device: Mapping[str, Any] | None) -> dict[str, Any]:
    """A copy of the document with ``device``'s block (else the old one), with the ceilings the
    old one kept. Where the block comes to name another device, each entry keeps the old one's
    facts as its own record, so that load_kernel still warns that it was measured elsewhere."""
    old = dict(doc.get("device") or {})
    header = dict(device or old)
    if "ceilings" in old:
        header.setdefault("ceilings", old["ceilings"])
    was = _device_facts(old) if written_for_another(old, header) else None
    kernels = {name: [raw if not isinstance(raw, dict) else  # no entry: kept for a person to fix
                      {**raw, "device": dict(was)} if was and "device" not in raw else dict(raw) for raw in items]
               if isinstance(items, list) else items for name, items in (doc.get("kernels") or {}).items()}
    for items in kernels.values():
        if isinstance(items, list):
            _own_device(items, header)
    # keys a person added beside them (notes: {owner: ...}) are kept (trial 72: dropped at the next save)
    return {**{k: v for k, v in doc.items() if k not in ("device", "kernels")}, "device": header, "kernels": kernels}


def _own_device(items: list[dict[str, Any]], header: Mapping[str, Any]) -> None:
    """Drop the device records that name the profile's own device (its block says it)."""
    for i, raw in enumerate(items):
        if isinstance(raw, dict) and "device" in raw and _device_facts(raw["device"]) == _device_facts(header):
            items[i] = {k: v for k, v in raw.items() if k != "device"}


def with_ceilings(doc: Mapping[str, Any], device: Mapping[str, Any],
                  ceilings: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """The document with ``ceilings`` (name → value, unit, how) added to its device block (pure);
    one already there that is higher, in the same unit, stays: a ceiling is the most the device
    was measured to do, and a measurement on a busy device reads low (trial 44: 24.9 GFLOP/s
    replaced 111.7, and kernels were then drawn at 200% of it).

    Example:
        >>> with_ceilings({}, {"name": "d"}, {"copy bandwidth": {"value": 9.0, "unit": "GB/s"}})["device"]
        {'name': 'd', 'ceilings': {'copy bandwidth': {'value': 9.0, 'unit': 'GB/s'}}}
    """
    new = _rehome(doc, device)
    header = new["device"]
    old = dict(header.get("ceilings") or {})

    def higher(name: str, c: Mapping[str, Any]) -> dict[str, Any]:
        was = old.get(name)
        if isinstance(was, Mapping) and was.get("unit") == c.get("unit") and is_number(was.get("value")) \
                and was["value"] > c["value"]:
            return dict(was)
        return dict(c)

    header["ceilings"] = {**old, **{k: higher(k, v) for k, v in ceilings.items()}}
    return {**doc, **new}


def _mapping(value: Any) -> dict[Any, Any]:
    """``value``, a mapping, as a dict (trial 104: dict() took a list of pairs for one)."""
    if not isinstance(value, Mapping):
        raise TypeError(value)
    return dict(value)


def is_number(value: Any) -> bool:
    """Whether a profile's field holds a finite int or float (not a bool, NaN or inf)."""
    try:  # an int of 400 digits is no float (trial 99: OverflowError)
        return is_real(value) and math.isfinite(value)
    except OverflowError:
        return False


#: How long a save waits for another process's save to the same profile.
LOCK_WAIT_S = 60.0
#: A wait for the lock longer than this is said (another save takes well under it).
LOCK_SAID_S = 1.0


def _acquire(lock: FileLock, path: Path, wait_s: float) -> None:
    """Take ``lock``, saying so where it takes longer than :data:`LOCK_SAID_S` (trial 73: a run
    waited a minute at its end without a line); Timeout after ``wait_s``. A stop signal that
    comes while it waits (noted only, while a run saves) ends the wait with SaveStopped
    (trial 83: Ctrl-C was ignored for the rest of the minute, and the command exited 0)."""
    stops_before = stops.stop_count()
    try:
        lock.acquire(timeout=min(LOCK_SAID_S, wait_s))
        return
    except Timeout:
        if wait_s <= LOCK_SAID_S:
            raise
    warn(f"{path.name}: another process holds its lock ({path.name}.lock); waiting up to {wait_s:g} s to save")
    deadline = time.monotonic() + wait_s - LOCK_SAID_S
    while True:
        try:
            lock.acquire(timeout=max(0.0, min(_LOCK_POLL_S, deadline - time.monotonic())))
            return
        except Timeout:
            if stops.stop_count() != stops_before:
                raise SaveStopped(f"stopped while another process held {path.name}'s lock ({path.name}.lock)") \
                    from None
            if time.monotonic() >= deadline:
                raise


#: How often a wait for the profile's lock looks for a stop signal.
_LOCK_POLL_S = 0.2


def save(entry: Entry, kernel: str, device: Mapping[str, Any], path: Path,
         usable: Callable[[Entry], bool] | None = None, seen: Seen | None = None,
         wait_s: float = LOCK_WAIT_S, edited: Callable[[Entry], bool] | None = None) -> str:
    """Lock (waiting up to ``wait_s`` for another process's save), re-read, merge (see
    :func:`merge`), back up and atomically replace the profile at ``path``."""
    try:
        return update(path, lambda doc: merge(doc, kernel, entry, device, usable, seen, edited, str(path)), wait_s)
    except OSError as exc:
        raise ProfileError(f"cannot write {path} ({exc.strerror}){_fix(exc)}") from None


def _fix(exc: OSError) -> str:
    """The fix for a failed save, where the error names one (trial 72: "Permission denied" said
    none, where a read-only file got the chmod advice)."""
    if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return "; make it and its folder writable to you, or set AUTOTUNE_HOME to another folder"
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return "; free some space on its disk, or set AUTOTUNE_HOME to a folder on another"
    return ""


def check_writable(path: Path) -> None:
    """ProfileError unless the profile at ``path`` can be read and its folder written: checked
    before a run measures anything, not found at its end. A malformed entry does not stop it:
    load_kernel skips that entry, and a result for its problem replaces it."""
    read(path, check_entries=False)
    refuse_read_only(path, ", or pass --no-save")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=path.parent):
            pass
    except OSError as exc:
        raise ProfileError(f"cannot write profiles to {path.parent} ({exc.strerror}); make it a writable "
                           "folder, set AUTOTUNE_HOME to one, or pass --no-save") from None  # (trial 125)


def _lock_fix(path: Path) -> str:
    """How to let this process open the profile's lock: its owner's to grant, or, where it (or
    the folder it would be made in) is this user's own, it is immutable (trial 106: the owner
    was told to ask its owner)."""
    lock = Path(f"{path}.lock")
    try:
        owner = (lock if lock.exists() else path.parent).stat().st_uid
    except OSError:
        owner = -1
    if owner == os.geteuid() or os.geteuid() == 0:  # (trial 107: permissions do not stop root)
        return (f"{'it or ' + str(path.parent) + ' is yours' if owner == os.geteuid() else 'you are root'}, so it is "
                "likely immutable (lsattr shows an i): chattr -i it")
    return "its owner can make it writable to you (chmod g+w with a shared group), or remove it while no save runs"


def refuse_read_only(path: Path, more: str = "") -> None:
    """ProfileError where the profile at ``path`` is read-only: made so (``chmod a-w``) to keep it
    as it is, which a save by rename would override, or immutable, which the save would find
    only at the end of a run. ``more``: another fix, where the caller has one (run's --no-save)."""
    if not path.is_file():
        return
    # trial 39: on a read-only mount chmod and chattr were offered, and --no-save alone failed
    # (the study database is there too)
    if _read_only_mount(path):
        raise ProfileError(f"{path} is on a read-only file system, so results cannot be saved to it; set "
                           "AUTOTUNE_HOME to a folder on a writable one"
                           + (", or pass --no-save --storage :memory:" if more else ""))
    if not os.access(path, os.R_OK):  # trial 71: a mode-000 profile was called read-only
        raise ProfileError(f"{path} cannot be read, so results cannot be merged into it; make it readable and "
                           f"writable to you (chmod u+rw) or set AUTOTUNE_HOME to another folder{more}")
    if not os.access(path, os.W_OK) or not path.stat().st_mode & 0o222:  # root passes access()
        owner = path.stat().st_uid
        how = "chmod u+w, or chattr -i where it is immutable" if owner == os.geteuid() else \
            f"it belongs to {_user(owner)}, who can make it writable to you (chmod g+w with a shared group)"
        raise ProfileError(f"{path} is read-only, so results cannot be saved to it; make it writable "
                           f"({how}) or set AUTOTUNE_HOME to another folder{more}")


def _user(uid: int) -> str:
    """A user's name, or ``uid N`` where it has none here."""
    try:
        import pwd

        return pwd.getpwuid(uid).pw_name
    except (ImportError, KeyError):
        return f"uid {uid}"


def _read_only_mount(path: Path) -> bool:
    """Whether ``path`` lies on a file system mounted read-only."""
    try:
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except (OSError, AttributeError):  # no statvfs (Windows): the other checks say what they can
        return False


def save_ceilings(ceilings: Mapping[str, Mapping[str, Any]], device: Mapping[str, Any], path: Path) -> None:
    """Keep measured ceilings in the device block of the profile at ``path`` (locked, as :func:`save`)."""
    try:
        update(path, lambda doc: (with_ceilings(_ceilings_checked(doc, path), device, ceilings), "updated"))
    except OSError as exc:
        raise ProfileError(f"cannot write {path} ({exc.strerror}); set AUTOTUNE_HOME to a writable folder") from None


def update(path: Path, change: Callable[[dict[str, Any]], tuple[dict[str, Any], str]],
           wait_s: float = LOCK_WAIT_S) -> str:
    """Lock, re-read, ``change`` (new document and verdict), back up and atomically replace; a
    link is followed, so that a profile shared by a link stays shared (the link was replaced by
    a file of its own, trial 26), to a file it makes where a dangling link points (trial 33)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.is_symlink() and (path.resolve().is_file() or not path.resolve().exists()):
        path = path.resolve()
        path.parent.mkdir(parents=True, exist_ok=True)
    # the lock file shares the profile's mode: a group's members each take it (trial 79: one
    # member's 0644 lock refused the others, whose error blamed the profile)
    lock = FileLock(str(path) + ".lock", mode=_mode_for(path))
    try:
        _acquire(lock, path, wait_s)
    except Timeout:  # its strerror is None: "cannot write X (None)" said nothing (trial 72)
        raise OSError(errno.EAGAIN, f"another process has held its lock, {path.name}.lock, for {wait_s:g} s: "
                                    "a run or load_kernel saving to it, or one stuck (`fuser` names it)") from None
    except PermissionError:
        raise OSError(errno.EACCES, f"its lock file, {path.name}.lock, cannot be opened by you (Permission "
                                    f"denied); {_lock_fix(path)}") from None
    try:
        refuse_read_only(path)
        for _ in range(REREADS):
            before = _state(path)
            doc = read(path, check_entries=False)
            new, verdict = change(doc)
            if verdict == "kept" or _replace(path, new, doc, before):
                return verdict
        raise OSError(errno.EBUSY, f"it kept changing while it was merged ({REREADS} tries); something other than "
                                   "autotune is writing it")
    finally:
        lock.release()


#: Reads of a profile that changed between its reading and its replacing, before giving up.
REREADS = 5


def _state(path: Path) -> tuple[int, int, int] | None:
    """The file's inode, size and modification time (None: absent)."""
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_ino, st.st_size, st.st_mtime_ns


def _replace(path: Path, new: dict[str, Any], doc: dict[str, Any], before: tuple[int, int, int] | None) -> bool:
    """Replace the profile with ``new`` (backing up ``doc``'s file), unless it changed since it
    was read (``before``): False then, to read it again. A person's editor that writes the file
    in place takes no lock (trial 39: a pick merged into a half-written file, the rest of that
    save went to the file the rename unlinked, and a tuned entry was lost, .bak included)."""
    text = yaml.dump(new, Dumper=_PlainDumper, sort_keys=False, default_flow_style=None, width=100,
                     allow_unicode=True)  # as written: "rév" (trial 99: saved as "r\xE9v")
    _tidy_strays(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    # the backup is replaced only once the profile is: a file that cannot be replaced (made
    # immutable, say) keeps both as they were
    backup = f"{tmp}.bak"
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:  # as read_yaml reads it, whatever the locale
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        _take_mode(Path(tmp), path)
        if doc:  # only a file that parsed to a profile may replace the backup
            shutil.copy2(path, backup)
            _take_mode(Path(backup), path)  # its group too (trial 79: copy2 keeps the mode alone)
        if _state(path) != before:
            Path(tmp).unlink()
            Path(backup).unlink(missing_ok=True)
            return False
        os.replace(tmp, path)
        if doc:
            os.replace(backup, str(path) + ".bak")
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        Path(backup).unlink(missing_ok=True)
        raise
    return True


#: How old a save's temporary file must be to count as left by a killed save (a save takes ms).
STRAY_S = 600.0


def _tidy_strays(path: Path) -> None:
    """Remove the temporary files that saves killed mid-way left beside the profile (SIGKILL;
    trial 92: one or two a kill, kept for good); another process's save under way makes its
    files within milliseconds, so only files older than :data:`STRAY_S` are taken."""
    now = time.time()
    for stray in path.parent.glob(f".{glob.escape(path.name)}.*"):
        with contextlib.suppress(OSError):  # gone meanwhile, or not this user's to remove
            if now - stray.lstat().st_ctime >= STRAY_S and stray.is_file():
                stray.unlink()


def _mode_for(path: Path) -> int:
    """The mode a file beside the profile at ``path`` takes: the profile's, or 0666 less the
    umask; the owner's read and write always (a lock file needs them: a read-only profile is
    refused once locked)."""
    try:
        return stat.S_IMODE(path.stat().st_mode) & 0o666 | 0o600
    except OSError:
        return 0o666 & ~_umask() | 0o600


def _take_mode(new: Path, old: Path) -> None:
    """Give the replacement the profile's mode and group (trial 77: in a group's AUTOTUNE_HOME one
    member's save made it 0644 under their own group-less umask, locking the others out); a new
    profile gets 0666 less the umask (mkstemp makes 0600; a profile is shared data)."""
    try:
        info = old.stat()
    except OSError:
        os.chmod(new, 0o666 & ~_umask())
        return
    os.chmod(new, stat.S_IMODE(info.st_mode))
    with contextlib.suppress(OSError):  # a group this user is not in: it keeps its own
        os.chown(new, -1, info.st_gid)


class _PlainDumper(yaml.SafeDumper):
    """Writes a value shared by several entries out in each: an anchor and its aliases (``&id001``,
    ``*id001``) break the whole file when the entry holding the anchor is deleted by hand."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def search_folders(user_folder: Path, spec_file: Path | None = None) -> list[Path]:
    """Where profiles are looked up: the user's folder first, then the ``profiles`` folder
    beside ``spec_file`` (an application shipping its own spec ships its profiles there), then
    the site's (``$AUTOTUNE_SITE_PROFILES``), then autotune's own.

    Example:
        >>> [str(f) for f in search_folders(Path("/home/me/.autotune/profiles"), Path("app/k.yaml"))][:2]
        ['/home/me/.autotune/profiles', 'app/profiles']
    """
    shipped = data_dir("profiles")
    beside = spec_file.parent / "profiles" if spec_file is not None else None
    found = [user_folder, *([beside] if beside is not None else []), *settings.site_profiles(), shipped]
    # each once, in that order, however named (trial 79: a site path through `..` showed the user's twice)
    seen: dict[str, Path] = {}
    for folder in found:
        seen.setdefault(os.path.realpath(folder), folder)
    return list(seen.values())


def collect(kernel: str, slug: str, folders: Iterable[Path],
            on_error: Callable[[ProfileError], None]) -> list[tuple[Entry, Path]]:
    """Every entry for ``kernel`` in the device's profile of each folder, with its file.

    An unreadable profile is passed to ``on_error`` and skipped, so one corrupt file does not
    hide the others.
    """
    return entries_in(readable((path_for(slug, f) for f in folders), on_error), kernel, on_error)


def entries_in(docs: Iterable[tuple[Path, Mapping[str, Any]]], kernel: str,
               on_error: Callable[[ProfileError], None]) -> list[tuple[Entry, Path]]:
    """Every well-formed entry for ``kernel`` in ``docs`` ((path, document), as :func:`readable`
    gives them); a malformed one goes to ``on_error`` (see :func:`entries`)."""
    return [(e, path) for path, doc in docs for e in entries(doc, kernel, str(path), on_error)]


def recorded_spec_files(kernel: str, folder: Path) -> list[str]:
    """The spec files that entries of ``kernel`` in ``folder``'s profiles record and that still
    exist (a kernel of the user's own, tuned here, named without its path: trial 52)."""
    found: dict[str, None] = {}
    for e, _ in sorted(entries_in(readable(sorted(folder.glob("*.yaml")), lambda exc: None), kernel,
                                  lambda exc: None), key=lambda pair: pair[0].tuned_at or "", reverse=True):
        if e.spec_file and Path(e.spec_file).is_file():
            found.setdefault(e.spec_file)
    return list(found)


def readable(paths: Iterable[Path], on_error: Callable[[ProfileError], None]) -> Iterator[tuple[Path, dict[str, Any]]]:
    """(path, document) of each profile in ``paths`` that reads, its entries unchecked (see
    :func:`entries_in`); the others go to ``on_error``."""
    for path in paths:
        try:
            yield path, read(path, check_entries=False)
        except ProfileError as exc:
            on_error(exc)


def distance(a: Mapping[str, Any], b: Mapping[str, Any]) -> float:
    """Log-distance between two problems' sizes; infinite when a non-size option differs."""
    total = 0.0
    for k, v in a.items():
        w = b.get(k)
        if isinstance(v, int) and isinstance(w, int) and v > 0 and w > 0:
            total += abs(math.log2(v) - math.log2(w))  # a ratio of huge ints underflows to 0
        elif v != w:
            return math.inf  # options such as layout must match
    return total


def ranked(candidates: Iterable[Entry], problem: Mapping[str, Any],
           spec_hash: str) -> list[Entry]:
    """Entries that can stand in for ``problem``, best first: nearest problem (log-distance
    over sizes; options must match), then entries of the current spec before stale ones, then
    the faster. A re-tune starts from the first few."""
    keyed = [(distance(dict(problem), dict(e.problem)), e.spec_hash != spec_hash, e.time_ms, i, e)
             for i, e in enumerate(candidates)]
    return [e for d, *_, e in sorted(keyed, key=lambda k: k[:4]) if math.isfinite(d)]
