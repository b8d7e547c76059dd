"""``load_kernel``: the tuned configuration of a kernel for a queue's device, ready to call.

How the configuration is chosen (``TunedKernel.origin`` says which way):

- ``exact``: a tuning run's entry for this very problem, from the user's profile or the
  shipped ones (of the current template and space).
- ``measured``: no tuning run's entry for the problem (a saved first-use pick is loaded as
  ``measured``, untimed), so the device's tuned configurations that are valid
  for it (those of the nearest problems first, at most a dozen; none where nothing was tuned),
  then the spec's baseline and default, are verified and timed there once, on buffers of their
  own, and the fastest that verified is kept (ProblemError when every one gives wrong
  results); the pick is saved to the user's profile, so later processes find it at once (see
  :mod:`autotune.firstuse`; ``AUTOTUNE_MEASURE_UNTUNED=0`` turns this off), until a tuning run
  writes an entry among the candidates after it: then it is timed again beside them. Tuning runs'
  entries from another version of the spec (its template edited since, say) are not used as
  they are, but their configurations are among those timed (after this version's at the same
  distance); the problem's own is named in the warning and timed first, and the pick never
  replaces it (reverting the edit makes it usable again).
- ``nearest``: measuring is off or could not run: the nearest problem's, not verified there.
- ``default``: measuring is off or ran nothing, and nothing tuned is valid: the spec's default
  configuration, or where that is invalid too, the valid configuration most like it, not
  verified there. One warning names the command that tunes the problem.

It never fails for lack of a profile.

Example:
    >>> import pyopencl as cl, numpy as np, autotune
    >>> ctx = cl.create_some_context(interactive=False)
    >>> queue = cl.CommandQueue(ctx, properties=cl.command_queue_properties.PROFILING_ENABLE)
    >>> mm = autotune.load_kernel("matmul", queue, M=64, N=64, K=64)  # doctest: +SKIP
    >>> run = mm(a_buf, b_buf, c_buf)  # doctest: +SKIP
    >>> run.wait(); run.seconds  # doctest: +SKIP
"""

from __future__ import annotations

import math
import os
import threading
import time
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from shlex import quote
from typing import Any

import pyopencl as cl
import pyopencl.array as cl_array

from . import device as devices
from . import firstuse, fits, health, profiles, record, settings
from .arguments import Arguments, input_needs
from .diagnose import SameBuildError, deliberate, explain, guarded_by
from .errors import AutotuneError, BuildError, ProblemError, ProfileError, clipped, warn_once
from .errors import AutotuneWarning as AutotuneWarning  # what its warnings are, named where they come from
from .errors import warn as _warn  # attributed to the application's call
from .launch import CandidateError, Launch, ProgramCache
from .lookup import load_spec
from .result import Measurement, Status
from .signatures import check_numbers
from .space import canonical, check, closest_valid, none_valid
from .spec import KernelSpec, Value, config_label, problem_label
from .verify import too_tight

_warned: set[tuple[str, ...]] = set()
#: First-use picks that could not be saved (a read-only or damaged profile), by spec version,
#: device and problem: this process uses them again rather than timing at every call.
_unsaved: dict[tuple[str, str, str], Choice] = {}
#: How long a first-use pick's save waits for another process's save to the profile (a run's
#: takes well under a second): an application's call is not held up for a minute (trial 72).
PICK_LOCK_WAIT_S = 5.0


@dataclass(frozen=True)
class Choice:
    """Which configuration the loader picked and how (see the module docstring for ``origin``)."""

    params: Mapping[str, Value]
    origin: str
    entry: profiles.Entry | None = None
    profile: Path | None = None
    programs: ProgramCache | None = None  # what measuring built, for the kernel to reuse


@dataclass(frozen=True)
class Run:
    """One call of a tuned kernel: its events, one per launch step, in order.

    ``seconds`` is the whole call's device time, from the start of the first step to the end
    of the last (the queue needs ``PROFILING_ENABLE``); the last event alone would time only
    the last step of a multi-step kernel.
    """

    events: tuple[cl.Event, ...]

    @property
    def event(self) -> cl.Event:
        """The last step's event: when it completes, the call's outputs are written (in-order queue)."""
        return self.events[-1]

    def wait(self) -> None:
        cl.wait_for_events(list(self.events))

    @property
    def seconds(self) -> float:
        """Device time of the whole call (waits for it)."""
        self.wait()
        try:
            return (self.events[-1].profile.end - self.events[0].profile.start) * 1e-9
        except cl.Error as exc:
            raise AutotuneError(
                f"no profiling information ({exc}); create the queue with "
                "properties=cl.command_queue_properties.PROFILING_ENABLE to time calls") from None


class TunedKernel:
    """A built, tuned kernel: call it with its buffers to enqueue it.

    Attributes:
        params: the configuration in use (parameters and build-flag switches).
        origin: ``exact``, ``measured``, ``nearest`` or ``default`` (how it was chosen).
        global_size, local_size: the NDRange of the (first) launch step (``local_size`` None
            where the spec gives no ``local:``: the runtime chooses).
        arg_names: the arguments ``__call__`` takes, in order.
        problem: the problem it was loaded for (every key, defaults filled in).
        build_options: the options its program was built with.
        entry: the profile entry it came from (:class:`autotune.profiles.Entry`: ``time_ms``,
            ``spread_ms``, ``baseline_ms``, ``trials``, ``partial``, ``picked``, ``tuned_at``,
            ``error``...); None for ``default``.
        profile: the profile file the entry was read from or saved to (for a pick that could not
            be saved, where it was to go); None for ``default``.
    """

    def __init__(self, spec: KernelSpec, queue: cl.CommandQueue, problem: Mapping[str, Any],
                 choice: Choice, facts: Mapping[str, Any]) -> None:
        self.spec, self.queue, self.problem = spec, queue, dict(problem)
        self.choice = choice
        self.params = dict(choice.params)
        self.origin = choice.origin
        self.entry = choice.entry
        self.profile = choice.profile
        self._context = _context(queue)
        try:
            self._launch = Launch(self._context, spec, self.params, self.problem, facts, choice.programs)
        except CandidateError as exc:
            builds_here(devices.of(queue.device))  # or the device is at fault, not the configuration
            what = "does not build here" if exc.status == "compile_error" else "cannot run here"  # trial 58
            error = BuildError if exc.status == "compile_error" else AutotuneError
            raise error(f"{spec.name}: the chosen configuration {what}: {exc}") from None
        first = self._launch.geometry.steps[0]
        self.global_size, self.local_size = first.global_size, first.local_size
        self.build_options = self._launch.options
        self.arg_names = self._launch.arg_names
        self._arguments = Arguments(spec, self.problem, self.arg_names, self._context, queue.device)

    def __reduce__(self) -> Any:
        """Refused with the way out: its queue and built kernels belong to this process (trial 75:
        pickling gave pyopencl's bare "cannot pickle 'CommandQueue' object")."""
        raise TypeError(f"a TunedKernel ({self.spec.name}) holds its queue and built kernels, which belong to this "
                        "process and cannot be pickled or deep-copied: another process calls autotune.load_kernel "
                        "itself, and copy.copy gives a second handle on the same ones")

    def __copy__(self) -> TunedKernel:
        """A second handle on the same queue and built kernels (a shallow copy, as before)."""
        twin = object.__new__(type(self))
        twin.__dict__.update(self.__dict__)
        return twin

    def __call__(self, *args: Any, wait_for: Sequence[cl.Event | Run] | cl.Event | Run | None = None,
                 **named: Any) -> Run:
        """Enqueue with buffers (and scalars) in ``arg_names`` order; returns the call's :class:`Run`.

        Buffers are ``pyopencl.Buffer`` (sub-buffers too) or contiguous ``pyopencl.array.Array``
        of at least the bytes the problem needs. A missing, unknown or repeated argument or one of
        the wrong kind raises TypeError, a buffer too small ValueError; nothing is enqueued then.
        ``wait_for`` takes events and earlier runs of this kernel's context (another's: ValueError).
        """
        if wait_for is None:
            waits: list[Any] = []
        elif isinstance(wait_for, (Run, cl.Event)) or not isinstance(wait_for, Iterable):
            waits = [wait_for]  # one event, run or (checked below) something else
        else:
            waits = list(wait_for)
        if not all(isinstance(w, (Run, cl.Event)) for w in waits):
            raise TypeError(f"{self.spec.name}: wait_for takes pyopencl Events and Runs (or one of them)")
        after = [e for w in waits for e in (w.events if isinstance(w, Run) else (w,))]
        if not all(self._ours(e) for e in after):  # OpenCL would refuse it only at enqueue
            raise ValueError(f"{self.spec.name}: wait_for holds an event of another context; an event "
                             "to wait for must come from a queue of this kernel's context")
        bound = self._arguments.bind(args, named)
        # pyopencl's protocol for Arrays: wait for the work still pending on them (an input made
        # on another queue, a zero fill on an out-of-order queue), and note this call on each
        # so that what follows (out.get(), a pyopencl kernel) waits for it (trial 36: 8-9 of 10
        # such calls read or returned data not yet written)
        arrays = [a for a in (*args, *named.values()) if isinstance(a, cl_array.Array)]
        after += [e for a in arrays for e in a.events]
        run = Run(tuple(self._launch.enqueue(self.queue, bound, after or None)))
        for a in arrays:
            a.add_event(run.event)
        return run

    def _ours(self, event: cl.Event) -> bool:
        """Whether ``event`` belongs to this kernel's context (an ended context's event does not)."""
        try:
            return bool(event.get_info(cl.event_info.CONTEXT) == self._context)
        except cl.Error:
            return False

    def __repr__(self) -> str:
        return f"TunedKernel({self.spec.name!r}, {self.origin}, params={self.params})"


def _context(queue: cl.CommandQueue) -> cl.Context:
    try:
        return queue.context
    except cl.LogicError as exc:
        raise AutotuneError(
            f"the queue's context is no longer valid ({exc}); keep a reference to the "
            "cl.Context for as long as its queues are used (some runtimes, Intel's among them, "
            "end a context its creator released even while a queue holds it)") from None


def choose(spec: KernelSpec, info: devices.DeviceInfo, problem: Mapping[str, Any],
           folders: list[Path] | None = None, timer: firstuse.Timer | None = None) -> Choice:
    """Pick the configuration for ``problem`` on ``info`` (see the module docstring).

    ``folders``: where profiles are looked up, the user's (where a pick is saved) first;
    ``timer``: how candidates are timed (none: no measuring, the nearest problem's).
    """
    # threads loading one untuned problem at once: the first times the candidates, the others
    # then read its pick (each timing them gave each thread its own, the noise deciding)
    with _one_at_a_time((spec.spec_hash, info.slug, problem_label(problem))):
        return _choose_in(spec, info, problem, folders, timer)


_choosing: dict[tuple[str, str, str], threading.Lock] = {}
_CHOOSING = threading.Lock()


def _one_at_a_time(key: tuple[str, str, str]) -> threading.Lock:
    """The lock of one kernel version, device and problem."""
    with _CHOOSING:
        return _choosing.setdefault(key, threading.Lock())


def _yours(spec: KernelSpec) -> set[str]:
    """The profile folders (real paths) whose faults are the user's to fix: theirs, and the one
    beside the spec where they can write it and it is no site's. Another's is its owner's (trial
    79: a site's was "fix it by hand"), judged by its folder, not the message's words (trial 95),
    and an application's beside its spec too (trial 97)."""
    beside, site = spec.path.parent / "profiles", {os.path.realpath(f) for f in settings.site_profiles()}
    mine = os.access(beside, os.W_OK) and os.path.realpath(beside) not in site
    return {os.path.realpath(settings.profiles_dir()), *([os.path.realpath(beside)] if mine else [])}


def _ignoring(owner: str, exc: ProfileError) -> None:
    _warn(f"ignoring profile: {exc}{owner}")


def _ignoring_entry(exc: ProfileError) -> None:
    # the kernel's block, where it is no list (trial 104: "an entry", for all of them)
    _warn(f"ignoring {'every entry of the kernel' if isinstance(exc, profiles.NotAList) else 'an entry'}: {exc}")


def _choose_in(spec: KernelSpec, info: devices.DeviceInfo, problem: Mapping[str, Any],
               folders: list[Path] | None, timer: firstuse.Timer | None) -> Choice:
    """:func:`choose`, for one thread at a time."""
    folders = folders or profiles.search_folders(settings.profiles_dir(), spec.path)
    yours = _yours(spec)
    docs: dict[Path, dict[str, Any]] = {}
    for f in folders:
        owner = "" if os.path.realpath(f) in yours else " (not yours: tell its owner)"
        docs.update(profiles.readable([profiles.path_for(info.slug, f)], partial(_ignoring, owner)))
    entries = profiles.entries_in(docs.items(), spec.name, _ignoring_entry)
    found = [(e, p) for e, p in entries if e.spec_hash == spec.spec_hash]
    # tuning runs' entries from another version of the spec: not used as they are, but their
    # configurations are timed with the others (a small template edit rarely changes the
    # fastest), and this problem's is named and timed first
    older = [(e, p) for e, p in entries if e.spec_hash != spec.spec_hash and not e.picked]
    chosen = _choose(spec, info, problem, found, folders[0], timer, older)
    if chosen.entry is not None and chosen.profile is not None:  # read from a profile, not picked now
        _measured_elsewhere(chosen.profile, chosen.entry.device, spec, info, problem)
    return chosen


def _measured_elsewhere(path: Path, measured_on: Any, spec: KernelSpec, info: devices.DeviceInfo,
                 problem: Mapping[str, Any]) -> None:
    """Warn (once per profile, kernel, device and other device) when the entry used, from
    ``path``, was ``measured_on`` another device (trial 72: per profile only, the second kernel
    loaded from it was used unwarned)."""
    mine = info.profile_header()
    other = profiles.written_for_another(measured_on, mine)
    if other is not None:
        warn_once(_warned, (str(path), spec.name, info.slug, f"measured on {other}"),
                  f"{path} holds {spec.name} entries measured on {other}, not this {profiles.described(mine)}: "
                  f"they are used, but may be slow here (`{tune_command(spec, problem, info)}` tunes this device)")


def _warn_partial(spec: KernelSpec, info: devices.DeviceInfo, problem: Mapping[str, Any],
                  entry: profiles.Entry, path: Path) -> None:
    """Warn, once a process, that the entry used comes from a run stopped early (trial 44: one
    stopped after its naive baseline served that kernel, 40x slower, without a word)."""
    warn_once(_warned, (str(path), spec.name, problem_label(problem), "partial"),
              f"the {spec.name} entry for {problem_label(problem)} in {path} is partial (its run was stopped, or "
              f"its leaders not timed again, after {entry.trials} trial{'s' if entry.trials != 1 else ''}): it is "
              f"used, but more tuning may find a faster one: `{tune_command(spec, problem, info)}` (with the "
              "--storage that run used, if any, it goes on from where that run stopped)")


def _choose(spec: KernelSpec, info: devices.DeviceInfo, problem: Mapping[str, Any],
            found: list[tuple[profiles.Entry, Path]], user: Path, timer: firstuse.Timer | None,
            older: Sequence[tuple[profiles.Entry, Path]] = ()) -> Choice:
    """The choice among ``found`` (this spec version's entries) and ``older`` (tuned entries of
    other versions of the spec); a pick is saved in ``user``."""
    facts = info.facts()
    # a tuning run's entry before a pick made at an earlier first use, and a finished run's
    # before a stopped one's (trial 23: a run stopped after its baseline, in the user's profile,
    # hid an application's shipped entry); the user's profile before the shipped ones; of two
    # copies in one profile (a hand edit), the faster
    folder = {path: i for i, path in enumerate(dict.fromkeys(p for _, p in found))}
    here = sorted((ep for ep in found if dict(ep[0].problem) == dict(problem)),
                  key=lambda ep: (ep[0].picked, ep[0].partial, folder[ep[1]], ep[0].time_ms))
    older_here = [ep for ep in older if dict(ep[0].problem) == dict(problem)]
    lead = f"no tuned {spec.name} for {info.name} at {problem_label(problem)}"
    timing = timer if settings.measure_untuned() else None
    candidates = None
    rename: str | None = None  # another spec file of this kernel name, whose entry refuses a run of this one
    earlier: Choice | None = None  # a first-use pick that tuning runs since may beat
    # the first that can be used here: a pick saved beside a tuned entry this device cannot run
    # (a profile copied from a bigger device) was passed over, and every call timed again (trial 48)
    usable = next(((e, p, c) for e, p in here if (c := _usable_params(spec, e, problem, facts)) is not None), None)
    if here:
        entry, path, params = usable or (*here[0], None)
        if params is not None:
            earlier = Choice(params, "measured" if entry.picked else "exact", entry, path)
            if entry.partial and not entry.picked:
                _warn_partial(spec, info, problem, entry, path)
            if not entry.picked or timing is None:
                return earlier
            candidates = _candidates(spec, [*older, *found], problem, facts)
            if (since := _tuned_since(entry, candidates)) is None:
                return earlier
            # trial 29: a pick made before a run tuned a nearby size kept a configuration 15x
            # slower than that run's; the pick is timed again beside the newer ones
            candidates = [(params, entry, path), *(c for c in candidates if c[0] != params)]
            lead = (f"the {spec.name} configuration picked at first use for {problem_label(problem)} "
                    f"({entry.tuned_at}) predates the entry tuned for {problem_label(since.problem)} "
                    f"({since.tuned_at})")
        else:
            why = spec.unusable(entry) or "its configuration is not valid for this problem on this device"
            lead = f"the {spec.name} entry for {problem_label(problem)} in {path} cannot be used ({why})"
    elif miswritten := [ep for ep in found if _written_otherwise(spec, ep[0], problem)]:
        entry, path = miswritten[0]  # trial 90: `M: "256"` by hand was passed over without a word
        lead = f"the {spec.name} entry for {problem_label(problem)} in {path} cannot be used ({spec.unusable(entry)})"
    elif older_here:
        entry, path = older_here[0]
        lead = (f"the {spec.name} entry for {problem_label(problem)} in {path} was tuned "
                f"{entry.tuned_at or 'earlier'} for another version of the spec (its template, reference "
                f"or space has changed since, or another spec has the kernel name {spec.name})")
        if not entry.picked and (other := spec.namesake(entry.spec_file)) is not None:  # trial 61: a run was
            # offered, which tuner refuses while that file's entry is there
            rename = other
            lead = (f"the {spec.name} entry for {problem_label(problem)} in {path} was tuned with {other}, another "
                    f"spec of the kernel name {spec.name}: give this spec another `kernel:` name before tuning it "
                    "(a run of it is refused while that file's entry is there)")
    if candidates is None:
        candidates = _candidates(spec, [*older, *found], problem, facts)
    if timing is not None:
        # timing draws the inputs and the reference on the host: a size too big for that got
        # the application killed by the kernel's OOM killer (trial 29), so it is not timed
        if (room := fits.no_room(spec, problem, info)) is not None:
            lead += f", and it cannot be timed there ({room})"
        elif (picked := _measure(spec, info, problem, candidates, timing, user, lead, rename)) is not None:
            return picked
    if earlier is not None:  # verified here before: better than a configuration not verified
        return earlier
    if candidates:
        return _nearest(spec, info, problem, *candidates[0], lead, rename)
    return _fallback(spec, info, problem, facts, lead, rename)


def _written_otherwise(spec: KernelSpec, entry: profiles.Entry, problem: Mapping[str, Any]) -> bool:
    """Whether ``entry``'s problem is ``problem`` written another way (a size as text), which
    no lookup matches (:meth:`KernelSpec.unusable`)."""
    try:
        return dict(entry.problem) != dict(problem) and spec.resolve_problem(entry.problem) == dict(problem)
    except AutotuneError:
        return False


def _usable_params(spec: KernelSpec, entry: profiles.Entry, problem: Mapping[str, Any],
                   facts: Mapping[str, Any]) -> dict[str, Value] | None:
    """The configuration ``entry`` holds, where it can be used for ``problem`` on this device."""
    params = spec.from_stored(entry.params, entry.build_flags, whole=True)
    return params if params is not None and _valid(spec, params, problem, facts) else None


def _valid(spec: KernelSpec, params: Mapping[str, Value], problem: Mapping[str, Any],
           facts: Mapping[str, Any]) -> bool:
    try:
        return check(spec, params, problem, facts) is None
    except AutotuneError:
        return False


def _candidates(spec: KernelSpec, found: list[tuple[profiles.Entry, Path]], problem: Mapping[str, Any],
                facts: Mapping[str, Any]) -> list[tuple[dict[str, Value], profiles.Entry, Path]]:
    """The distinct tuned configurations valid for ``problem``: those of the nearest problems
    (other layouts after the same one), then this version of the spec's, then the faster, first."""
    def order(ep: tuple[profiles.Entry, Path]) -> tuple[float, float, bool, float]:
        d = profiles.distance(dict(problem), dict(ep[0].problem))
        sizes_only = profiles.distance({k: v for k, v in problem.items() if isinstance(v, int)},
                                       {k: v for k, v in ep[0].problem.items() if isinstance(v, int)})
        return (not math.isfinite(d), sizes_only, ep[0].spec_hash != spec.spec_hash, ep[0].time_ms)

    out: list[tuple[dict[str, Value], profiles.Entry, Path]] = []
    for entry, path in sorted((ep for ep in found if not ep[0].picked and _of_a_problem(spec, ep[0])), key=order):
        params = spec.from_stored(entry.params, entry.build_flags, whole=True)
        if params is not None and all(params != c for c, _, _ in out) and _valid(spec, params, problem, facts):
            out.append((params, entry, path))
    return out


def _of_a_problem(spec: KernelSpec, entry: profiles.Entry) -> bool:
    """Whether ``entry``'s problem is one the spec can have, as it resolves it (trial 82: one
    edited to N=-5, which `show` said load_kernel skips, was used as the nearest size's)."""
    try:
        return spec.resolve_problem(entry.problem) == dict(entry.problem)
    except ProblemError:
        return False


def _tuned_since(pick: profiles.Entry, candidates: Sequence[tuple[dict[str, Value], profiles.Entry, Path]]
                 ) -> profiles.Entry | None:
    """The entry among those first use would time that a tuning run wrote after ``pick`` was
    made, if any (timestamps in one ISO form compare as strings)."""
    return next((e for _, e, _ in candidates[:firstuse.MAX_CANDIDATES] if e.tuned_at > pick.tuned_at), None)


def _nearest(spec: KernelSpec, info: devices.DeviceInfo, problem: Mapping[str, Any],
             params: dict[str, Value], entry: profiles.Entry, path: Path, lead: str,
             rename: str | None = None) -> Choice:
    """The nearest problem's configuration, with the warning (after ``lead``, why there is no
    entry to use) that names the command that tunes this one."""
    # trial 36: a copy of the spec in another file was called "another version"
    version = "" if entry.spec_hash == spec.spec_hash else " with another version of the spec (or another spec " \
                                                           f"file named {spec.name})"
    what = ("its configuration, not verified with this version" if dict(entry.problem) == dict(problem)
            else f"the configuration tuned for {problem_label(entry.problem)}{version}, not verified at this size")
    _warn_once(spec, info, problem, "nearest", (
        f"{lead}; using {what} ({_tuning(spec, problem, info, rename)} tunes and verifies it)"))
    return Choice(params, "nearest", entry, path)


def _measure(spec: KernelSpec, info: devices.DeviceInfo, problem: Mapping[str, Any],
             candidates: list[tuple[dict[str, Value], profiles.Entry, Path]], timer: firstuse.Timer,
             folder: Path, lead: str, rename: str | None = None) -> Choice | None:
    """Verify and time the candidates and the spec's default and baseline, save the fastest that
    verified as a picked entry; None when none ran, or where each failed for want of memory
    (ProblemError when every one that ran gives wrong results, :func:`_none_ran`'s error when
    each failed otherwise)."""
    key = (spec.spec_hash, info.slug, problem_label(problem))
    if (kept := _unsaved.get(key)) is not None:
        return kept
    t0 = time.perf_counter()
    tuned = [c for c, _, _ in candidates[:firstuse.MAX_CANDIDATES]]
    stopped = sum(e.partial for _, e, _ in candidates[:firstuse.MAX_CANDIDATES])
    own: dict[str, dict[str, Value]] = {}  # the spec's own, timed too: a pick never loses to them
    for what, params in (("baseline", spec.baseline_config), ("default", spec.default_config)):
        params = canonical(spec, params, problem, info.facts())
        if params not in tuned and params not in own.values() and _valid(spec, params, problem, info.facts()):
            own[what] = params
    costly = _baseline_cost(spec, problem, candidates) if "baseline" in own else None
    if costly is not None:  # trial 62: its verifying launch alone took 96 s of a 20 s first use
        left_out = own.pop("baseline")
    if not tuned and "default" not in own and (near := _closest_default(spec, problem, info.facts())) is not None:
        own.setdefault(NEAR_DEFAULT, near)  # what would be used unverified otherwise: verified too
    # with nothing tuned valid, the default (else the one most like it, else the baseline) sets the cut-off
    first = tuned or [own[w] for w in ("default", NEAR_DEFAULT, "baseline") if w in own][:1]
    if not first:
        return None
    try:
        timed = timer(first, [p for p in own.values() if p not in first])
        if costly is not None and timed.fastest is None:  # nothing else verified: the baseline after all
            again = timer([left_out], [])
            timed, costly = replace(again, measurements=timed.measurements + again.measurements), None
            own["baseline"] = left_out  # named in the warning as timed (trial 65: left unsaid)
    except (cl.Error, MemoryError):  # no room for the buffers of this size: take the nearest
        return None
    best = timed.fastest
    if timed.measurements and all(m.status is Status.COMPILE_ERROR for m in timed.measurements):
        builds_here(info)  # before a warning that names a configuration to use, and how to tune it
        raise _unbuilt(spec, problem, info, timed.measurements, lead)
    wrong = [m for m in timed.measurements if m.status is Status.WRONG_RESULT]
    if best is None or best.params is None:
        if wrong:
            fix = ("the spec's tolerance must allow rounding" if too_tight(wrong[0].message) else
                   f"`{tune_command(spec, problem, info)}` searches the whole space for one that verifies there, "
                   "and the spec's constraints should rule out the wrong ones")
            others = _others(timed.measurements)  # (trial 114: the others' build error unsaid)
            raise ProblemError(
                f"{lead}, and each configuration it could use gives wrong results{' or fails' if others else ''} "
                f"there ({len(wrong)} failed verification; {config_label(wrong[0].params)}: {wrong[0].message})"
                f"{others}; {fix}")
        if timed.measurements and not any(_for_want_of_memory(m) for m in timed.measurements):
            builds_here(info)  # or the device is at fault
            raise _none_ran(spec, problem, info, timed.measurements, lead)
        return None
    took_s = time.perf_counter() - t0  # the timing alone, not a wait for the profile's lock (trial 73)
    entry = record.entry(spec, problem, best, trials=len(timed.measurements), picked=True)
    path = profiles.path_for(info.slug, folder)
    saved_to: Path | None = path  # .profile: none where it was not saved (trial 104: the path all the same)
    facts = info.facts()

    def usable(old: profiles.Entry) -> bool:  # here: a tuned entry this device cannot run gives way
        return spec.stores(old) and _usable_params(spec, old, problem, facts) is not None

    try:
        # an application's call waits a little for a run's save; the pick is used unsaved after that
        verdict = profiles.save(entry, spec.name, info.profile_header(), path, usable=usable, wait_s=PICK_LOCK_WAIT_S,
                                edited=lambda old: not spec.stores(old))
        # trial 39: the entry kept may be another process's pick, made at the same time
        user_of_old = rename or "the spec's old version"  # (trial 110: the other file was "the old version")
        saved = (f"not saved: {path} keeps its entry for this size" if verdict.startswith("kept") else
                 f"saved to {path} beside that entry, which stays for you to fix"
                 if verdict == "added beside an entry edited by hand" else
                 f"saved to {path} beside that entry, which {user_of_old} still uses"
                 if verdict.startswith("added beside") else f"saved to {path}")
        if verdict.startswith("kept"):  # this process does not time it again (trial 48: every call did)
            _unsaved[key] = Choice(best.params, "measured", entry, None)
            saved_to = None
    except ProfileError as exc:
        saved = f"not saved: {exc}; this process uses it again without timing"
        _unsaved[key] = Choice(best.params, "measured", entry, None)
        saved_to = None
    what = _timed(len(tuned), stopped, list(own), bool(candidates) and candidates[0][1].picked)
    if timed.untimed:  # (trial 110: "verified and timed" all of them, "the last 2 of them not timed")
        what = f"{len(timed.measurements)} of {len(timed.measurements) + timed.untimed} candidates ({what})"
    _warn_once(spec, info, problem, "measured", (
        f"{lead}: verified and timed {what} there "
        f"in {took_s:.1f} s{_skipped(wrong)}{_failed(timed.measurements)}{_untimed(timed.untimed)}"
        f"{_costly(spec, costly)} "
        f"and took the fastest ({best.median_ms:.4g} ms; {saved}); {_tuning(spec, problem, info, rename)} tunes "
        "this size"))
    return Choice(best.params, "measured", entry, saved_to, timed.cache)


def builds_here(info: devices.DeviceInfo) -> None:
    """DeviceError where the device cannot build OpenCL at all (trial 29: a queue on PoCL 3 on a
    CPU its LLVM does not know was told the configuration does not build, and how to tune it
    there). Asked only once a build failed: the check probes in a child process the first time."""
    found = devices.list_devices()
    item = next(((d, dev) for d, dev in found if d.selector == info.selector), None)
    if item is not None:
        devices.require_builds(item, found, use="load it on a queue of")


#: How first use names the valid configuration most like an invalid default.
NEAR_DEFAULT = "configuration nearest its default"


def _timed(tuned: int, stopped: int, own: list[str], earlier: bool = False) -> str:
    """What first use timed: ``3 tuned configurations and the spec’s default and baseline``;
    ``stopped`` of the tuned are the best of runs that stopped early (partial entries);
    ``earlier``: the first of the ``tuned`` is an earlier pick's configuration."""
    mine = f"the spec’s {' and '.join(own)}" if own else ""
    first = "the earlier pick" if earlier else ""
    tuned -= earlier
    early = f" ({stopped} from a run stopped early)" if stopped else ""
    theirs = f"{tuned} tuned configuration{'s' if tuned > 1 else ''}{early}" if tuned else ""
    named = [part for part in (first, theirs, mine) if part]
    return ", ".join(named[:-1]) + " and " + named[-1] if len(named) > 1 else "".join(named)


def _baseline_cost(spec: KernelSpec, problem: Mapping[str, Any], candidates: list[tuple[dict[str, Value],
                   profiles.Entry, Path]]) -> tuple[float, profiles.Entry] | None:
    """The baseline's time at ``problem`` (ms), as the nearest tuned entry with a baseline
    timing predicts it by the work the spec's headline metric counts, and that entry, where the
    baseline is not worth timing (an entry of this version of the spec, at the same values of the
    problem's other keys): it was at least :data:`BASELINE_LOST` times slower there, and
    that problem had no more work than this one (a naive kernel that loses at a size does not
    win at a larger one, where its verifying launch, which cannot be cut short, takes longest:
    trial 62, 96 s at matmul 3000³ on a CPU, where 62 ms at 512³ predicts 13 s) or it would
    take longer than first use's whole budget here. None otherwise: it is timed."""
    if not spec.metrics:
        return None
    for _, entry, _ in candidates:
        # another version's timing, or another layout's, says nothing of this baseline here
        # (trial 65: a template edit made the baseline 100x faster, and it was left out on the old timing)
        if entry.baseline_ms is None or entry.picked or entry.spec_hash != spec.spec_hash \
                or not math.isfinite(profiles.distance(dict(problem), dict(entry.problem))):
            continue
        try:
            work = _work(spec, problem) / _work(spec, spec.resolve_problem(entry.problem))
        except (ProblemError, ArithmeticError):  # an entry of another version's problem keys
            return None
        ms = entry.baseline_ms * work
        lost = entry.baseline_ms >= BASELINE_LOST * entry.time_ms
        return (ms, entry) if lost and (work >= 1 or ms > 1e3 * firstuse.BUDGET_S) else None
    return None


#: First use leaves the baseline out where it was this many times slower than the tuned
#: configuration at a problem of no more work (:func:`_baseline_cost`).
BASELINE_LOST = 2.0


def _work(spec: KernelSpec, problem: Mapping[str, Any]) -> float:
    """The work the spec's headline metric counts at ``problem`` (its value at 1 ms)."""
    return next(iter(spec.throughput(problem, 1.0).values()))


def _costly(spec: KernelSpec, costly: tuple[float, profiles.Entry] | None) -> str:
    """What the first-use warning says of a baseline left untimed (:func:`_baseline_cost`)."""
    if costly is None:
        return ""
    ms, entry = costly
    assert entry.baseline_ms is not None
    return (f" (not the spec’s baseline: {entry.baseline_ms / entry.time_ms:.0f}x slower than the tuned "
            f"configuration at {problem_label(spec.resolve_problem(entry.problem))}, {_seconds(ms)} here by that "
            "timing)")


def _seconds(ms: float) -> str:
    """A predicted time in words, to two figures (trial 72: 0.2 ms was "about 0 ms").

    >>> _seconds(0.2), _seconds(123.4), _seconds(5000)
    ('about 0.2 ms', 'about 120 ms', 'about 5 s')
    """
    def two(x: float) -> str:
        return f"{float(f'{x:.2g}'):g}"
    return f"about {two(ms / 1e3)} s" if ms >= 1e3 else f"about {two(ms)} ms"


def _untimed(count: int) -> str:
    """What the first-use warning says of the candidates left untimed when its time was up."""
    return (f" (the last {count} not timed: first use starts none after {firstuse.BUDGET_S:.0f} s)"
            if count else "")


def _for_want_of_memory(m: Measurement) -> bool:
    """Whether a first-use failure may be first use's own: its copies and guard zones take memory
    that an application's call does not (NVIDIA allocates buffers at their first launch)."""
    return m.status is Status.LAUNCH_ERROR and any(
        code in m.message for code in ("MEM_OBJECT_ALLOCATION_FAILURE", "OUT_OF_HOST_MEMORY"))


def _unbuilt(spec: KernelSpec, problem: Mapping[str, Any], info: devices.DeviceInfo,
             failed: Sequence[Measurement], lead: str) -> BuildError:
    """Every configuration first use could take failed to build: the template's #error refused
    each (then the constraint or requires entry to add), or its mistake, said as a run says it."""
    on_purpose = [deliberate(m.message, spec.template) for m in failed]
    if all(on_purpose):  # not "fix the #error line" (trial 107); each, not one (trial 111)
        refused = failed[0]
        reads = guarded_by(refused.message, spec.template)
        # (trial 111: one that reads problem keys only was to be a constraint, which leaves none valid;
        # trial 115: nor do an include guard, the template's own #defines or the compiler's macros count)
        keys = {k.name for k in spec.problem}
        fix = ("that #if reads problem keys only, so no configuration builds at this problem: give the spec a "
               "requires entry that rules out what it tests, which refuses such a problem before anything is "
               "built"
               if reads & keys and not reads & set(spec.parameter_names) else
               "add that condition to the spec's constraints, so that only configurations the template builds are "
               f"taken, or `{tune_command(spec, problem, info)}` searches the whole space for one")
        return BuildError(
            f"{lead}: the template's #error refuses each configuration it could use here "
            f"({len(failed)} tried; {config_label(refused.params or {})}: "
            f"{clipped(refused.message, 200)}); {fix}")
    # the template's fault: said as a run says it, judged by a run's watch, not "using the
    # default, not verified" and then its build error (trial 106)
    watch = SameBuildError(len(failed), spec.template)
    same = [watch.add(m.status, m.message) for m in failed][-1]
    mistake = failed[on_purpose.index(False)]  # not one the #error refused
    return BuildError(f"{lead}: " + explain(mistake.message, spec.template, spec.macros(problem),
                                            f"{info.name} ({info.platform})", len(failed),
                                            [n for n, _ in spec.derived], same=same, places=watch.places()))


def _none_ran(spec: KernelSpec, problem: Mapping[str, Any], info: devices.DeviceInfo,
              failed: Sequence[Measurement], lead: str) -> AutotuneError:
    """Every configuration first use could take failed there (to build, launch or finish): the
    error, not a fall-back to one of them unverified that fails at the call (trial 109). A
    BuildError where one failed to build: the template's fault somewhere."""
    kinds = Counter(m.status.value for m in failed)
    first = failed[0]
    error = BuildError if Status.COMPILE_ERROR.value in kinds else AutotuneError
    return error(f"{lead}, and each configuration it could use failed there ({len(failed)} tried: "
                 f"{', '.join(f'{n} {kind}' for kind, n in kinds.most_common())}; {config_label(first.params or {})}: "
                 f"{clipped(first.message, 200)}); `{tune_command(spec, problem, info)}` searches the whole space for "
                 "one that runs there")


def _skipped(wrong: list[Measurement]) -> str:
    """What the first-use warning says of the candidates that failed verification."""
    if not wrong:
        return ""
    return (f" ({len(wrong)} gave wrong results there and {'was' if len(wrong) == 1 else 'were'} left out, "
            f"e.g. {config_label(wrong[0].params)})")


def _others(measured: Sequence[Measurement]) -> str:
    """What an error of wrong results says of the candidates that failed otherwise: the first's
    message too (trial 114: a baseline's build error went unsaid)."""
    failed = [m for m in measured if not m.ok and m.status is not Status.WRONG_RESULT]
    if not failed:
        return ""
    return (f", and {len(failed)} failed otherwise ({config_label(failed[0].params or {})}: "
            f"{failed[0].status.value}: {clipped(failed[0].message, 200)})")


def _failed(measured: Sequence[Measurement]) -> str:
    """What the first-use warning says of the candidates that failed otherwise (a build, a launch,
    a timeout): trial 67, a default that cannot build was said to be verified and timed."""
    failed = [m for m in measured if not m.ok and m.status is not Status.WRONG_RESULT and not m.pruned]
    if not failed:
        return ""
    return (f" ({len(failed)} failed there ({failed[0].status.value}) and {'was' if len(failed) == 1 else 'were'} "
            f"left out, e.g. {config_label(failed[0].params or {})})")


def _fallback(spec: KernelSpec, info: devices.DeviceInfo, problem: Mapping[str, Any],
              facts: Mapping[str, Any], lead: str, rename: str | None = None) -> Choice:
    """Nothing tuned is valid: the spec's default, else the valid configuration most like it."""
    default = canonical(spec, spec.default_config, problem, facts)
    params = default if _valid(spec, default, problem, facts) else _closest_default(spec, problem, facts)
    if params is None:
        raise none_valid(spec, problem, facts, info.name)
    what = "default configuration" if params == default else "valid configuration nearest the default"
    _warn_once(spec, info, problem, "default", (
        f"{lead}; using the {what}, not verified there "
        f"({_tuning(spec, problem, info, rename)} tunes and verifies it)"))
    return Choice(params, "default")


def _tuning(spec: KernelSpec, problem: Mapping[str, Any], info: devices.DeviceInfo, rename: str | None) -> str:
    """The command that tunes ``problem``, as a warning names it: where ``rename``, another spec
    file of this kernel name, has its entry, once this spec is renamed (trial 110: the command
    given was refused)."""
    command = f"`{tune_command(spec, problem, info)}`"
    return command if rename is None else f"{command}, once this spec has a `kernel:` name of its own,"


_closest: dict[tuple[str, str, str, str], dict[str, Value] | None] = {}


def _closest_default(spec: KernelSpec, problem: Mapping[str, Any], facts: Mapping[str, Any]) -> dict[str, Value] | None:
    """space.closest_valid to the default, once per process for each kernel, problem and device."""
    key = (str(spec.path), spec.spec_hash, problem_label(problem), repr(sorted(facts.items())))
    if key not in _closest:
        _closest[key] = closest_valid(spec, canonical(spec, spec.default_config, problem, facts), problem, facts)
    return _closest[key]


def _warn_once(spec: KernelSpec, info: devices.DeviceInfo, problem: Mapping[str, Any], origin: str,
               message: str) -> None:
    """Warn once a process per problem and origin: a problem whose kernel comes another way
    later (the nearest tuned once a run tuned another size) is warned of again (trial 75)."""
    warn_once(_warned, (str(spec.path), info.slug, problem_label(problem), origin), message)


def tune_command(spec: KernelSpec, problem: Mapping[str, Any], info: devices.DeviceInfo) -> str:
    """The command that tunes ``problem`` on ``info``'s device: the built-in name, or the spec's path.

    The device is named by its profile's slug, not ``P:D``: an application that made its context
    before importing autotune numbers the platforms without the runtimes autotune registers, so
    its 0:0 may be another device in the command's process (trial 122)."""
    words = ["autotune run", spec.argument, "-s", quote(problem_label(problem))]  # a path with spaces (trial 34)
    return " ".join(words + (["-d", quote(info.slug)] if info.selector else []))


def load_kernel(name: str | os.PathLike[str], queue: cl.CommandQueue, *sizes: Any, **problem: Any) -> TunedKernel:
    """The tuned ``name`` kernel (built-in name or spec path) for ``queue``'s device.

    Problem keys not given take the spec's defaults. Raises AutotuneError for bad input
    (unknown kernel, bad size), TypeError where ``queue`` is not a pyopencl CommandQueue, and
    never for a missing profile. A problem without a tuned entry
    may take a moment the first time (see the module docstring).
    """
    if isinstance(getattr(name, "device", None), cl.Device) and isinstance(queue, str | os.PathLike):
        raise TypeError(f"load_kernel(queue, {str(queue)!r}): the arguments are the other way round: "
                        f"load_kernel({str(queue)!r}, queue, ...)")  # trial 70
    if not isinstance(getattr(queue, "device", None), cl.Device):  # a queue's, not a context's or None
        raise TypeError(f"load_kernel({name!r}, queue): queue must be a pyopencl.CommandQueue, "
                        f"not {type(queue).__name__}")
    if not isinstance(name, str | os.PathLike):  # trial 90: os.fspath's "expected str, bytes or os.PathLike"
        raise TypeError(f"load_kernel({name!r}, queue): the kernel is a built-in kernel's name or a spec's path, "
                        f"not {type(name).__name__}")
    spec = load_spec(os.fspath(name))
    if sizes:  # trial 89: `load_kernel(spec, queue, 1024, 1024)` got Python's "takes 2 positional arguments"
        named = ", ".join(f"{k.name}={v!r}" for k, v in zip(spec.problem, sizes, strict=False))
        extra = f" ({spec.name} has {len(spec.problem)} problem keys)" if len(sizes) > len(spec.problem) else ""
        raise TypeError(f"load_kernel({name!r}, queue, {', '.join(map(repr, sizes))}): give the problem by name: "
                        f"load_kernel({name!r}, queue, {named}){extra}")
    prob = spec.resolve_problem(problem)
    check_numbers(spec, prob)  # a size its kernel's int cannot hold: before any input is drawn
    input_needs(spec, prob)  # arguments too big for the address space: refused before choosing (and cached)
    info = devices.of(queue.device)  # its selector, for the command that tunes it
    if health.mismatched_target(queue.device.version, health.cpu_flags()) is not None:
        builds_here(info)  # its builds succeed, and the first launch would abort the application
    timer = firstuse.timer(spec, prob, _context(queue), queue.device, info.facts())
    return TunedKernel(spec, queue, prob, choose(spec, info, prob, timer=timer), info.facts())
