"""A tuned kernel's call: its arguments checked and bound before anything is enqueued.

A buffer too small for the problem would be written past its end (another allocation of the
caller's silently overwritten, or the process aborted by the allocator), and ``None`` crashes
the driver; so each argument's kind, size and context is checked against what the spec's
reference module gives for the problem, and a bad call is a TypeError or ValueError naming
the argument.

Example:
    >>> need = _need(np.zeros(16, np.float32))
    >>> need.nbytes, _need(np.int32(3)).nbytes
    (64, None)
"""

from __future__ import annotations

import inspect
import math
import numbers
import weakref
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from typing import Any
from typing import cast as cast_to

import numpy as np
import pyopencl as cl
import pyopencl.array as cl_array
import pyopencl.cltypes as cltypes

from . import hostmemory, hosttime
from .errors import ExpressionError, ProblemError, SpecError, warn_once
from .expr import Expr
from .measure import host_inputs
from .signatures import cast, check_declared
from .spec import MAX_SIZE, KernelSpec, ProblemKey, problem_label


class Arguments:
    """Checks and binds the arguments of calls to one kernel, problem and context."""

    def __init__(self, spec: KernelSpec, problem: Mapping[str, Any], names: tuple[str, ...],
                 context: cl.Context, device: cl.Device) -> None:
        self.spec, self.problem, self.arg_names, self._context = spec, dict(problem), names, context
        # a sub-buffer (for an Array with an offset) must start on this alignment; the info is in bits
        self._align = max(1, device.mem_base_addr_align // 8)
        self._needs = _arg_needs(spec, self.problem, names)
        self._larger: set[tuple[str, tuple[int, ...]]] = set()  # Arrays larger than the problem's, warned of

    def bind(self, args: tuple[Any, ...], named: Mapping[str, Any]) -> dict[str, Any]:
        """The arguments by name, checked, as the kernels take them (buffers, numpy scalars)."""
        name, takes = self.spec.name, ", ".join(self.arg_names)
        if len(args) > len(self.arg_names):
            keys = [k for k in self.problem if k not in self.arg_names]  # trial 113: W, H passed too
            were = "was" if len(keys) == 1 else "were"  # (trial 116: "N were")
            fixed = f" (the problem's {', '.join(keys)} {were} fixed when the kernel was loaded, and not passed)" \
                if keys and len(args) <= len(self.arg_names) + len(keys) else ""
            raise TypeError(f"{name} takes {len(self.arg_names)} arguments ({takes}), got {len(args)}{fixed}")
        bound = dict(zip(self.arg_names, args, strict=False))  # the rest may come by name
        unknown = [k for k in named if k not in self.arg_names]
        if unknown:
            keys = [k for k in unknown if k in self.problem]  # trial 89: `k(a, b, W=1000)` said no more
            fixed = f" ({', '.join(keys)}: a problem key, fixed when the kernel was loaded: " \
                    f"load_kernel(..., {keys[0]}=...) for another size)" if keys else ""
            raise TypeError(f"{name}: unknown argument(s) {', '.join(unknown)}; it takes {takes}{fixed}")
        twice = [k for k in named if k in bound]
        if twice:
            raise TypeError(f"{name}: argument(s) {', '.join(twice)} given by position and by name")
        bound.update(named)
        missing = [n for n in self.arg_names if n not in bound]
        if missing:
            raise TypeError(f"{name}: missing argument(s) {', '.join(missing)}")
        checked = {n: self._checked(n, bound[n]) for n in self.arg_names}
        self._check_aliases({n: bound[n] for n, v in checked.items() if isinstance(v, cl.MemoryObjectHolder)})
        for n in self.arg_names:
            self._check_larger(n, bound[n])
        return checked

    def _check_larger(self, arg: str, value: Any) -> None:
        """A warning, once per argument and shape, for an Array larger than the problem needs
        (trial 55: 512x512 arrays for a kernel loaded for 256x256 gave wrong numbers without a
        word); a plain Buffer carries no shape, and a pool's may well be larger."""
        nbytes = self._needs[arg].nbytes
        if not isinstance(value, cl_array.Array) or nbytes is None or value.nbytes <= nbytes:
            return
        warn_once(self._larger, (arg, value.shape),
                  f"{self.spec.name}: argument {arg} is an array of shape {value.shape} ({value.size} elements), and "
                  f"the kernel, loaded for {problem_label(self.problem)}, uses its first "
                  f"{nbytes // value.dtype.itemsize}: the rest is neither read nor written; load the kernel for the "
                  "array's problem, or pass a view of the elements it uses")

    def _check_aliases(self, buffers: Mapping[str, Any]) -> None:
        """ValueError where an output shares memory with another argument: the kernel would
        read what it has already overwritten (``reverse(a, a)`` gave wrong results). Inputs may
        share memory (``matmul(a, a, c)`` is A·A)."""
        extents = {n: _extent(v) for n, v in buffers.items()}
        for out in self.spec.outputs:
            if out not in extents:
                continue
            root, start, end = extents[out]
            for other, (root2, start2, end2) in extents.items():
                if other != out and root == root2 and start < end2 and start2 < end:
                    raise ValueError(f"{self.spec.name}: arguments {other} and {out} share memory, and {out} is "
                                     f"written: pass {out} a buffer of its own")

    def _checked(self, arg: str, value: Any) -> Any:
        need = self._needs[arg]
        if need.nbytes is None:
            where = f"{self.spec.name}: argument {arg}"
            out = _scalar(where, value, need.dtype)
            if need.allowed is not None:  # the spec's own word: its condition alone
                try:
                    allowed = self.spec.allows(arg, int(out), self.problem)
                except ExpressionError as exc:  # (trial 118: `N // reps` at 0, the argument unnamed)
                    raise ValueError(f"{where} is {value}, where the spec's arguments.{arg} cannot be evaluated: "
                                     f"{exc}") from None
                if not allowed:
                    raise ValueError(f"{where} is {value}, but the spec allows it where {need.allowed.source} "
                                     f"(arguments.{arg}), at {problem_label(self.problem)}")
                return out
            if need.drawn is not None and not need.drawn[0] <= out <= need.drawn[1]:
                # trials 115, 117: a drawn index, offset or row let through by its kind wrote past a buffer
                lo, hi = need.drawn
                raise ValueError(f"{where} is {value}, but the reference module's inputs() draws it from {lo} to "
                                 f"{hi} (over the seeds tried), and the kernel was verified there alone, where it may "
                                 f"index its arrays by it: pass {lo} to {hi}, or declare the values a call may pass "
                                 f"in the spec's arguments:, a condition over {arg} and the problem keys that keeps "
                                 "the kernel within its arrays")
            if need.must_be is not None and out != need.must_be:
                # the kernel's launch and buffers are the loaded size's: another one reads or
                # writes past them (a crash) or leaves part undone (wrong numbers, no error)
                raise ValueError(f"{where} is {value}, but " + self._loaded_for(arg, need, out))
            return out
        return self._buffer(arg, value, need)

    def _loaded_for(self, arg: str, need: _ArgNeed, value: int) -> str:
        """Why a size argument must be ``need.must_be``, and how to pass another."""
        if need.size_of is not None:
            key = need.size_of
            choices = next((k.values for k in self.spec.problem if k.name == key and not k.is_size), None)
            fits = 0 < value <= MAX_SIZE if choices is None else str(value) in map(str, choices)
            other = f", or load the kernel for {key}={value}" if fits else ""
            return (f"the kernel was loaded for {key}={need.must_be}, which the reference module's inputs() "
                    f"passes as {arg}: pass {need.must_be}{other}")
        shown = ", ".join(f"{k}={v}" for k, v in self.problem.items())
        said = (f"the kernel was loaded for {shown}, for which the reference module's inputs() passes "
                f"{arg}={need.must_be}")
        if need.fixed:  # no size moved it (trial 107: told to load a problem that gives 5, and none does)
            return (f"{said}, and it stays so at other sizes: pass {need.must_be}; where the application chooses "
                    f"it, make it a problem key of the spec, which load_kernel takes, or declare the values a call "
                    f"may pass in the spec's arguments: (e.g. {arg}: \"1 <= {arg} <= 1000\"; {arg} is held to it "
                    "since a kernel may size its reads and writes by it)")
        other = f", or load the kernel for the problem that gives {value}" if value > 0 else ""  # (trial 114: of 0)
        return f"{said}: pass {need.must_be}{other}"

    def _buffer(self, arg: str, value: Any, need: _ArgNeed) -> cl.Buffer:
        """``value`` as a buffer the kernel may use whole: of this context, ``need.nbytes`` or
        more, and (an Array) of its element type."""
        where, nbytes = f"{self.spec.name}: argument {arg}", need.nbytes
        assert nbytes is not None  # a buffer argument
        if isinstance(value, cl_array.Array):
            # another element type would be read as the kernel's: wrong numbers, no error (a
            # plain Buffer carries no type to check)
            if value.dtype != need.dtype:
                # the same bytes under another type (bytes packed as int32) keep them with a view
                view = f"a view: .view(numpy.{need.dtype})"
                if value.dtype.fields:  # a vector type (cltypes.float4): its components, as a view
                    fix = f"pass its components as {view}"
                else:
                    fix = f"convert its values: .astype(numpy.{need.dtype})" + (
                        f"; or, to keep its bytes as they are, {view}"
                        if value.nbytes == nbytes and value.nbytes % np.dtype(need.dtype).itemsize == 0
                        and value.dtype.isnative else "")  # trial 90: a view of '>f4' keeps its bytes swapped
                raise TypeError(f"{where} holds {_dtype_name(value.dtype)}; the kernel takes {need.dtype} ({fix})")
            if value.base_data is None and value.nbytes < nbytes:  # empty: its size is what is wrong (trial 72)
                shown = ", ".join(f"{k}={v}" for k, v in self.problem.items())
                raise ValueError(f"{where} needs {nbytes} bytes for {shown}; got an empty array")
            if not _is_buffer(value.base_data):  # in shared virtual memory
                raise TypeError(f"{where}: an array in shared virtual memory ({_kind(value.base_data)}) is not "
                                "supported; allocate it from a buffer (the default allocator, or a MemoryPool)")
            if not value.flags.forc:  # said before its size, which a strided view also lacks (trial 47)
                raise ValueError(f"{where}: the array is not contiguous; the kernel reads its buffer in memory order")
            mem, size = _as_buffer(value.base_data), value.nbytes  # the view's bytes, not its base buffer's
        elif _is_buffer(value):
            mem, size = _as_buffer(value), value.size  # a sub-buffer's size is its own
        else:
            raise TypeError(f"{where} must be a pyopencl Buffer or pyopencl.array.Array, got {_kind(value)}")
        self._check_access(where, arg, mem)
        if size < nbytes:
            shown = ", ".join(f"{k}={v}" for k, v in self.problem.items())
            raise ValueError(f"{where} needs {nbytes} bytes for {shown}; got a buffer of {size} bytes")
        if mem.context != self._context:  # enqueueing it would fail, on some runtimes by crashing
            raise ValueError(f"{where}: the buffer belongs to another OpenCL context than the queue's")
        return self._array_data(where, value, mem) if isinstance(value, cl_array.Array) else mem

    def _check_access(self, where: str, arg: str, mem: cl.Buffer) -> None:
        """TypeError where the kernels would write a READ_ONLY buffer or read a WRITE_ONLY one,
        which OpenCL leaves undefined (trial 90: accepted, and right on one runtime)."""
        written, read = arg in self.spec.outputs, arg not in self.spec.outputs or arg in self.spec.inplace
        for flag, named, needed, does in ((cl.mem_flags.READ_ONLY, "READ_ONLY", written, "writes"),
                                          (cl.mem_flags.WRITE_ONLY, "WRITE_ONLY", read, "reads")):
            if needed and mem.flags & flag:
                raise TypeError(f"{where}: its buffer was made {named}, and the kernel {does} it; make it with "
                                "mem_flags.READ_WRITE")

    def _array_data(self, where: str, array: cl_array.Array, mem: cl.Buffer) -> cl.Buffer:
        """The buffer that starts where ``array`` (held in ``mem``) does: an argument has no offset."""
        if not array.flags.c_contiguous:  # a transpose: its elements are not where its indexes say
            raise ValueError(f"{where}: the array is in column-major order (a transpose, or order='F') and the "
                             "kernel reads its buffer in memory order; pass a C-ordered array or, where the "
                             "kernel expects column-major data (e.g. layout=col), its flat view "
                             ".reshape(-1, order='F')")
        if not array.offset:
            return mem
        if array.offset % self._align:
            raise ValueError(f"{where}: the array starts {array.offset} byte{'s' * (array.offset != 1)} into its "
                             "buffer, not a multiple "
                             f"of the {self._align} bytes a sub-buffer needs on this device; copy it")
        try:
            return mem.get_sub_region(array.offset, array.nbytes)
        except cl.Error as exc:  # e.g. its buffer is itself a sub-buffer
            raise ValueError(f"{where}: cannot pass an array with an offset here ({exc}); copy it") from None


@dataclass(frozen=True)
class _ArgNeed:
    """What one kernel argument takes: a buffer of ``nbytes`` or more (of ``dtype`` elements),
    or (``nbytes`` None) a scalar of ``dtype``; one that follows the problem's sizes must be
    ``must_be``, and one that is a size key's value names it in ``size_of``."""

    dtype: np.dtype[Any]
    nbytes: int | None
    must_be: int | None = None
    size_of: str | None = None
    fixed: bool = False  # must_be stayed at the other sizes tried
    drawn: tuple[int, int] | None = None  # data: the least and most inputs() drew (:func:`_sizes_passed`)
    allowed: Expr | None = None  # the spec's arguments: condition, in place of the rules above


#: What the arguments take, by (spec file, spec hash, problem): computed once per process for each problem.
_needs_cache: dict[tuple[str, str, tuple[tuple[str, Any], ...]], dict[str, _ArgNeed]] = {}


def input_needs(spec: KernelSpec, problem: Mapping[str, Any]) -> dict[str, _ArgNeed]:
    """What each argument ``inputs()`` gives takes for ``problem``, cached per process (see
    :func:`_input_needs`); ProblemError where they need more memory than this machine can give."""
    # arguments: is left out of the spec hash, not out of what a call may pass (trial 118: an edit of
    # it took no effect in the process)
    key = (str(spec.path), spec.spec_hash + repr([(n, e.source) for n, e in spec.arguments]),
           tuple(sorted(problem.items())))
    if key not in _needs_cache:
        _needs_cache[key] = _input_needs(spec, problem)
    return _needs_cache[key]


def _arg_needs(spec: KernelSpec, problem: Mapping[str, Any], names: tuple[str, ...]) -> dict[str, _ArgNeed]:
    """What each of ``names`` takes for ``problem`` (:func:`input_needs`)."""
    needs = input_needs(spec, problem)
    unknown = [n for n in names if n not in needs]
    if unknown:  # the tuner could not have run it either (Launch._arg)
        raise SpecError(f"{spec.path}: args: {', '.join(unknown)} not returned by the reference module's inputs()")
    return {n: needs[n] for n in names}


def _input_needs(spec: KernelSpec, problem: Mapping[str, Any]) -> dict[str, _ArgNeed]:
    """What the reference module's ``inputs()`` gives for ``problem``: the arrays the tuner
    verifies with, so the one definition of the sizes (a spec need not repeat them). It runs
    ``inputs()`` several times (other seeds, other sizes): a slow one is said after
    :data:`hosttime.NOTE_AFTER_S` (trial 104: 5.5 s without a word for one of 0.5 s)."""
    said = (f"{spec.name}: learning the sizes of its arguments for {problem_label(problem)} from "
            f"{spec.reference}'s inputs() (run at other seeds and sizes too) has taken {hosttime.NOTE_AFTER_S:g} s "
            "so far; a faster inputs() shortens it")
    with hosttime.noted(said, hosttime.NOTE_AFTER_S):
        given = shaped_inputs(spec, problem)
        needs = {k: _need(v) for k, v in given.items()}
        declared = dict(spec.arguments)
        check_declared(spec, problem, given)
        for arg in declared.keys() & needs.keys():
            needs[arg] = replace(needs[arg], allowed=declared[arg])
        held, drawn = _sizes_passed(spec, problem, given, {a: n for a, n in needs.items() if a not in declared})
        for arg, (key, fixed) in held.items():
            needs[arg] = replace(needs[arg], must_be=int(given[arg]), size_of=key, fixed=fixed)
        for arg, (lo, hi) in drawn.items():
            needs[arg] = replace(needs[arg], drawn=(lo, hi))
    return needs


def _sizes_passed(spec: KernelSpec, problem: Mapping[str, Any], given: Mapping[str, Any],
                  needs: Mapping[str, _ArgNeed]
                  ) -> tuple[dict[str, tuple[str | None, bool]], dict[str, tuple[int, int]]]:
    """The integer arguments that ``inputs()`` gives (``given``, taking ``needs``) which a call
    must pass as given: argument -> (the problem key whose value it is, where it is one's, else
    None; whether no other size changes it). Not held: data (another seed's draws change it and
    no array's shape with it: a drawn seed or index), kept within its draws. Every other integer is
    held, since the kernel was verified with that value alone and may size its reads and writes
    by it: telling a count of its own (of repeats) from a stride, an offset, a halo, a divisor or
    a factor of one by the sizes alone failed each time it was tried (trials 102-114: each one
    left free let a call write past a buffer). One the application chooses is a problem key, or
    declared in the spec's ``arguments:``. Also returned: by data argument, the least and most
    value inputs() drew for it (a call must stay within them: trials 115, 117)."""
    ints = [a for a, need in needs.items() if need.nbytes is None and need.dtype.kind in "iu"]
    # sizes that fit REAL_BELOW are drawn for real at once: the stand-in's run first would only
    # be thrown away (trial 104: a slow inputs() ran 10 times)
    small = sum(need.nbytes or 0 for need in needs.values()) << (2 + len(spec.problem)) <= REAL_BELOW
    # one whose value a choice of the problem's gives (trial 109: "make it a problem key", of C)
    out: dict[str, str | None] = {a: k.name for a in ints for k in spec.problem
                                  if not k.is_size and _follows_choice(spec, problem, given, a, k, small)}
    for moved in _moves(spec, problem) if ints else ():
        try:
            other = shaped_inputs(spec, moved, small=small)
        except Exception:  # noqa: BLE001 - the reference's own code at another size: no word from it
            continue
        for a in [a for a in ints if a not in out and a in other and other[a] != given[a]]:
            out[a] = next((k for k in moved if moved[k] != problem[k] and given[a] == problem[k]
                           and other[a] == moved[k]), None)
        if all(a in out for a in ints):
            break
    # one that follows no size key may be data: another seed's draws change it, and no array's
    # shape with it (a gather's nnz changes its arrays: held to this draw's, as the buffers are)
    data: set[str] = set()
    doubtful = [a for a in ints if out.get(a) is None]
    drawn = {a: {int(given[a])} for a in doubtful}
    for seed in range(1, 11) if doubtful else ():
        # more seeds where they are cheap, for data (its range: trial 119, 3 to 97 of -100 to 100) or a
        # 0 or 1 alike at seeds 0-3 (trial 115: held), not for a count alike at each (trial 117: a
        # slow inputs() ran twice as often)
        if seed > 3 and (not small or not data and not any(drawn[a] <= {0, 1} for a in doubtful)):
            break
        other = shaped_inputs(spec, problem, seed, small)
        if not _reshaped(given, other):
            data.update(a for a in doubtful if a not in other or other[a] != given[a])
            for a in (a for a in doubtful if a in other):
                drawn[a].add(int(other[a]))
    return ({a: (out.get(a), a not in out) for a in ints if a not in data},
            {a: (min(drawn[a]), max(drawn[a])) for a in data})


def _follows_choice(spec: KernelSpec, problem: Mapping[str, Any], given: Mapping[str, Any], arg: str,
                    key: ProblemKey, small: bool) -> bool:
    """Whether integer ``arg`` is the value of choice ``key``: equal to it here, and to another
    choice's where the problem has that (trial 111: a count of 3 was taken for V=3, and a call
    at V=3 refused a count of 5 with "load the kernel for V=5", which is no choice)."""
    if str(problem[key.name]) != str(given[arg]):
        return False
    for value in (v for v in key.values if v != problem[key.name]):
        try:
            other = shaped_inputs(spec, spec.resolve_problem({**problem, key.name: value}), small=small)
        except Exception:  # noqa: BLE001 - the reference's own code at another choice: no word from it
            continue
        return arg in other and str(other[arg]) == str(value)
    return True  # a choice of one value: it is that value


def _reshaped(given: Mapping[str, Any], other: Mapping[str, Any]) -> set[str]:
    """The arrays of ``given`` whose shape ``other`` changes."""
    return {a for a, v in given.items() if np.ndim(v) and a in other and np.shape(other[a]) != np.shape(v)}


def _moves(spec: KernelSpec, problem: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    """The problem with each size doubled, then halved (a size argument clamped at its least,
    max(N, 64) at N=64, follows it up only; trial 101), then all sizes at once (a constraint
    that ties them, M == N, refuses each alone: trial 101), as far as the spec takes them."""
    keys = [k.name for k in spec.problem if k.is_size]
    steps = [{k: 2 * problem[k]} for k in keys] + [{k: problem[k] // 2} for k in keys if problem[k] > 1]
    if len(keys) > 1:  # (one key: the same moves again)
        steps += [{k: 2 * problem[k] for k in keys}, {k: problem[k] // 2 for k in keys if problem[k] > 1}]
    for step in steps:
        if step:
            try:
                moved = spec.resolve_problem({**problem, **step})
            except (ProblemError, SpecError):  # a size the spec refuses
                continue
            yield moved


def shaped_inputs(spec: KernelSpec, problem: Mapping[str, Any], seed: int = 0, small: bool = False
                  ) -> dict[str, Any]:
    """The reference module's ``inputs()`` with the arrays' sizes and types but not their values.

    ``inputs()`` runs with :class:`_ShapeRng`, whose array draws are zeros that touch no
    memory, and so are their casts (:class:`_Untouched`), so a 1 GiB reverse costs
    milliseconds, not the 5 s and 1 GiB of drawing its bytes. Where its draws come to less than
    :data:`REAL_BELOW`, or the module does not run so (it checks its rng's type, say, or draws
    again until no value is 0), or gives an empty array with them (a size summed from drawn
    values: trial 101, a gather's nnz of 0, so any buffer passed and the kernel wrote past it),
    it runs again with a real rng, so that sizes that follow the drawn values are right (trial
    102: summed, plus one, they were not empty, and too small). ``seed``: the draws'; ``small``:
    the caller knows they come to less than :data:`REAL_BELOW`, so they are made for real at once.
    """
    if small:
        return host_inputs(spec, problem, np.random.default_rng(seed))
    try:
        given, drawn = _with_zeros(spec, problem, seed)
        if drawn > REAL_BELOW and not _sizes_follow_draws(spec, problem) and \
                not any(isinstance(v, np.ndarray) and v.ndim and not v.size for v in given.values()):
            return given
    except MemoryError:  # even untouched zeros need address space: no buffers that big here either
        raise _too_large(spec, problem) from None
    except SpecError:  # user code the stand-in does not fit: draw for real (a mistake raises again)
        pass
    try:
        return host_inputs(spec, problem, np.random.default_rng(seed))
    except MemoryError:
        raise _too_large(spec, problem) from None


def _with_zeros(spec: KernelSpec, problem: Mapping[str, Any], seed: int) -> tuple[dict[str, Any], int]:
    """``inputs()`` run with :class:`_ShapeRng`, and the bytes its array draws came to."""
    with np.errstate(all="ignore"):  # zeros where random numbers were: 1/x is fine here
        given = host_inputs(spec, problem, stand_in := _ShapeRng(seed))
    return given, stand_in.total


def _too_large(spec: KernelSpec, problem: Mapping[str, Any]) -> ProblemError:
    return ProblemError(f"{spec.name} at {problem_label(problem)}: its arguments need more memory than this "
                        "machine can give; use a smaller problem")


#: Whether inputs()' array shapes follow its drawn values, by (spec file, spec hash, the
#: problem's keys that are no sizes).
_follow_draws: dict[tuple[str, str, tuple[tuple[str, Any], ...]], bool] = {}


def _sizes_follow_draws(spec: KernelSpec, problem: Mapping[str, Any]) -> bool:
    """Whether the shapes of ``inputs()``'s arrays depend on the values it draws (a count of the
    draws over a threshold, a gather's nnz), as the stand-in's zeros cannot show: seen at the
    first problem, halving each size of ``problem``, whose draws come to :data:`REAL_BELOW` or
    less, by its shapes with zeros against those with real draws (trial 104: a size from
    drawn values came out as zeros make it above 16 MiB, and a call with inputs()' own arrays
    was refused). A spec whose sizes do not halve that far is taken not to."""
    # per choice of the problem's other keys too (trial 105: a sparse mode's, read at a dense one)
    key = (str(spec.path), spec.spec_hash, tuple(sorted((k.name, problem[k.name]) for k in spec.problem
                                                        if not k.is_size)))
    if key not in _follow_draws:
        _follow_draws[key] = _shapes_differ(spec, problem)
    return _follow_draws[key]


def _shapes_differ(spec: KernelSpec, problem: Mapping[str, Any]) -> bool:
    keys = [k.name for k in spec.problem if k.is_size]
    smaller = dict(problem)
    while any(smaller[k] > 1 for k in keys):
        try:
            smaller = spec.resolve_problem({**smaller, **{k: smaller[k] // 2 for k in keys if smaller[k] > 1}})
            zeros, drawn = _with_zeros(spec, smaller, 0)
            if drawn <= REAL_BELOW:
                real = host_inputs(spec, smaller, np.random.default_rng(0))
                return {a: np.shape(v) for a, v in zeros.items()} != {a: np.shape(v) for a, v in real.items()}
        except (ProblemError, SpecError, MemoryError):  # a size the spec refuses, code zeros do not fit
            return False
    return False


#: Draws of at most this many bytes are made for real (milliseconds), their sizes exact.
REAL_BELOW = 1 << 24


def _need(value: Any) -> _ArgNeed:
    array = np.asarray(value)
    return _ArgNeed(array.dtype, array.nbytes if array.ndim else None)


class _ShapeRng:
    """Stands in for ``np.random.Generator`` where only the sizes of ``inputs()`` matter.

    A draw of an array comes back zero-filled (np.zeros maps pages it never touches); one of a
    scalar is real, since a size or a scalar argument may depend on it. Sizes that depend on
    drawn array values come out wrong where they are not 0 (an empty array falls back to a
    real rng: :func:`shaped_inputs`).
    """

    #: Draws at most: more is a loop that draws until no value is 0, which zeros never end
    #: (trial 101: it ran until the draws added up to the host's memory, said as too little)
    MAX_DRAWS = 1000

    def __init__(self, seed: int = 0) -> None:
        self._rng = np.random.default_rng(seed)
        self.total = 0  # the bytes of every array drawn
        # the arrays cost nothing until a cast copies them (matmul's inputs() casts its draws to
        # float32): more than the host has free is refused before that copy is made; an array
        # let go no longer counts
        self._drawn, self._free, self._draws = 0, hostmemory.available(), 0

    def __getattr__(self, name: str) -> Any:
        real = getattr(self._rng, name)
        try:
            signature = inspect.signature(real)
        except (TypeError, ValueError):
            return real
        if "size" not in signature.parameters:
            return real  # shuffle, permutation, bytes: sized by what they are given

        def draw(*args: Any, **kwargs: Any) -> Any:
            bound = signature.bind(*args, **kwargs)
            size = bound.arguments.get("size")
            if size is None or bound.arguments.get("out") is not None:
                return real(*args, **kwargs)
            bound.arguments["size"] = 1  # one real draw gives the dtype and any trailing dimensions
            one = np.asarray(real(*bound.args, **bound.kwargs))
            shape = (size,) if isinstance(size, numbers.Integral) else tuple(size)
            nbytes = math.prod((*shape, *one.shape[1:])) * one.dtype.itemsize
            self._drawn, self._draws, self.total = self._drawn + nbytes, self._draws + 1, self.total + nbytes
            if self._draws > self.MAX_DRAWS:
                raise RuntimeError(f"more than {self.MAX_DRAWS} draws")  # a real rng, then
            if self._free is not None and self._drawn > self._free:
                raise MemoryError
            drawn = np.zeros((*shape, *one.shape[1:]), one.dtype).view(_Untouched)
            weakref.finalize(drawn, self._let_go, nbytes)
            return drawn

        return draw

    def _let_go(self, nbytes: int) -> None:
        self._drawn -= nbytes


class _Untouched(np.ndarray):
    """A draw of :class:`_ShapeRng`: zeros whose casts are untouched zeros too. A cast copies,
    and writing the copy maps its pages (trial 100: mul1's sizes at N=2**28 took 3 GiB and 8 s
    in every process that loaded it, its draw cast to int32)."""

    def astype(self, dtype: Any, order: str = "K", *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        fortran = order == "F" or (order in "AK" and self.flags.f_contiguous and self.ndim > 1)
        return np.zeros(self.shape, dtype, order="F" if fortran else "C").view(_Untouched)


def _is_buffer(mem: Any) -> bool:
    """Whether ``mem`` is an OpenCL buffer: a pyopencl Buffer, or a memory pool's PooledBuffer."""
    return isinstance(mem, cl.MemoryObjectHolder) and mem.type == cl.mem_object_type.BUFFER


def _as_buffer(mem: Any) -> cl.Buffer:
    """``mem``, a buffer (:func:`_is_buffer`), as a Buffer (a PooledBuffer has no sub-buffers;
    trial 90: a memory pool's arrays were refused), holding a reference of its own to the same memory."""
    return mem if isinstance(mem, cl.Buffer) else cast_to(cl.Buffer, cl.Buffer.from_int_ptr(mem.int_ptr, retain=True))


#: The "buffer" that host memory lies in, for :func:`_extent`: buffers made over the
#: application's own memory (``USE_HOST_PTR``) share memory where their host ranges overlap.
HOST = 0


def _extent(value: Any) -> tuple[int, int, int]:
    """(the buffer it lies in, first byte, end) of a checked buffer or array argument; a
    sub-buffer lies in its parent, an array where its offset and size say, and a buffer over
    host memory in that memory (trial 90: two over one numpy array were not seen to share it)."""
    if isinstance(value, cl_array.Array):
        root, start, _ = _extent(_as_buffer(value.base_data))
        return root, start + value.offset, start + value.offset + value.nbytes
    parent = value.get_info(cl.mem_info.ASSOCIATED_MEMOBJECT)
    if parent is not None:  # where its parent lies (trial 94: a sub-buffer's own host pointer is not its start)
        root, start, _ = _extent(parent)
        start += value.get_info(cl.mem_info.OFFSET)
        return root, start, start + value.size
    if value.flags & cl.mem_flags.USE_HOST_PTR:
        start = value.get_host_array((1,), np.uint8).__array_interface__["data"][0]
        return HOST, start, start + value.size
    return value.int_ptr, 0, value.size


def _scalar(where: str, value: Any, dtype: np.dtype[Any]) -> Any:
    """``value`` as the numpy scalar the kernel takes; TypeError unless it is a number of that kind."""
    integral = dtype.kind in "iu"
    # numbers.Real for a float: a complex number has no float to pass (float() raised a bare TypeError)
    if isinstance(value, np.ndarray) and value.ndim == 0:  # trial 90: told to pass a[0], which a 0-d array has not
        value = value[()]
    if isinstance(value, bool) or not isinstance(value, numbers.Integral if integral else numbers.Real):
        got = (f"a numpy array of shape {value.shape} (pass one element, e.g. a[0], or a number)"
               if isinstance(value, np.ndarray) else _kind(value))  # _kind's advice is for buffers
        raise TypeError(f"{where} must be {'an integer' if integral else 'a number'} ({dtype}), got {got}")
    out = cast(value, dtype)  # an int out of range: numpy would wrap it; a float: inf, said by a warning only
    if out is None:
        raise ValueError(f"{where}: {value} does not fit its type {dtype}" + ("" if integral else " (it would be inf)"))
    return out


def _dtype_name(dtype: np.dtype) -> str:
    """A numpy type as a user wrote it: a vector type of pyopencl.cltypes by its OpenCL name
    (its numpy form lists every field: [(('x', 's0'), '<f4'), ...]).

    Example:
        >>> _dtype_name(cltypes.float4), _dtype_name(np.dtype(np.int32))
        ('cltypes.float4', 'int32')
    """
    if dtype.fields:
        named = next((n for n, t in vars(cltypes).items() if isinstance(t, np.dtype) and t == dtype), None)
        if named is not None:
            return f"cltypes.{named}"
    return str(dtype)


def _kind(value: Any) -> str:
    """What ``value`` is, for an error message."""
    if value is None:
        return "None"
    if isinstance(value, np.ndarray):
        return "a numpy array (copy it to the device first, e.g. pyopencl.array.to_device(queue, a))"
    return f"{type(value).__module__}.{type(value).__qualname__}".removeprefix("builtins.")
