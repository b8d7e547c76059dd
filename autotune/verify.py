"""Is a candidate's output right? One output against the reference, within the spec's tolerance.

The expected values and what each element may be off by are prepared once per workload
(:meth:`Expected.prepare`); checking a candidate is then a few passes over its output in the
output's own precision. On a 4096² matmul output the check costs ~40 ms instead of the
~450 ms it took in float64 with the tolerance recomputed for every candidate: on a GPU that
was over half of a trial's time.

Example:
    >>> from autotune import spec as S
    >>> sp = S.load("reverse")
    >>> want = np.arange(4, dtype=np.uint8)
    >>> Expected.prepare(sp, "out", want, sp.default_problem()).check(want)
    (None, 0.0, None)
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .errors import SpecError, raised_in
from .spec import KernelSpec

#: An output whose elements are off by at most this many units in the last place is off by
#: rounding alone (adding in another order), not by a fault of the kernel's.
ROUNDING_ULPS = 16
#: What a wrong result's message says when the tolerance, not the kernel, is at fault.
TOO_TIGHT = "tighter than rounding allows"


def too_tight(message: str) -> bool:
    """Whether a wrong result's message says its only error is rounding (see ROUNDING_ULPS)."""
    return TOO_TIGHT in message


#: (why it is wrong or None, ‖got−want‖/‖want‖, the largest share of the tolerance an element
#: used); None where that check does not measure it: a check() of the reference module's own
#: (neither), an integer output, which is exact (no tolerance)
Verdict = tuple[str | None, float | None, float | None]
#: Every byte of an output (not ``inplace``) is this before a verifying launch (measure.Bench):
#: NaN in every float type, so an element the kernels never write cannot pass.
POISON_BYTE = 0xFF


@dataclass(frozen=True)
class Expected:
    """One output's expected values, ready to check candidates against.

    For floating outputs ``scale`` is 1 / (atol + rtol·|want| + bound) per element, so the
    share of the tolerance an element uses is |got − want| · scale; where that sum is 0 the
    element must be exact (``exact_at``).
    """

    spec: KernelSpec
    name: str
    want: np.ndarray
    problem: Mapping[str, Any]
    scale: np.ndarray | None = None
    exact_at: np.ndarray | None = None
    want_norm: float = 1.0
    rule: str = ""
    custom: Any = field(default=None, repr=False)

    @classmethod
    def prepare(cls, spec: KernelSpec, name: str, want: np.ndarray, problem: Mapping[str, Any],
                bound: np.ndarray | None = None) -> Expected:
        """``bound``: the reference module's per-element error bound (see measure.Workload)."""
        custom = getattr(spec.host_module(), "check", None)
        floating = np.issubdtype(want.dtype, np.floating)
        if custom is not None or not floating:
            return cls(spec, name, want, problem, custom=custom)
        work = np.result_type(want.dtype, np.float32)  # float16 is checked in float32
        w = want.astype(work, copy=False)
        env = spec.env(problem)
        rtol, atol = float(spec.rtol(env)), float(spec.atol(env))
        allowed = allowed_error(spec, problem, w, bound)
        exact = np.flatnonzero(allowed.ravel() <= 0)
        with np.errstate(divide="ignore"):
            scale = np.where(allowed > 0, 1.0 / allowed, 0.0).astype(work)
        rule = f"rtol={rtol:.3g}, atol={atol:.3g}" + (", plus the reference's error bound" if bound is not None else "")
        return cls(spec, name, w, problem, scale, exact if exact.size else None,
                   float(np.linalg.norm(w.astype(np.float64).ravel())) or 1.0, rule)

    def check(self, got: np.ndarray) -> Verdict:
        """(why ``got`` is wrong or None, its relative error, the largest share of the
        tolerance an element used: at most 1 when it passes); see :data:`Verdict`."""
        if self.custom is not None:
            try:
                why = self.custom(self.name, got, self.want, dict(self.problem))
            except MemoryError:
                raise
            except Exception as exc:  # the user's module: report it, with its file  # noqa: BLE001
                raise SpecError(f"{self.spec.reference}: check() raised "
                                f"{raised_in(exc, self.spec.reference)}") from exc
            except SystemExit as exc:  # as measure._call
                raise SpecError(f"{self.spec.reference}: check() called sys.exit({exc.code!r}); return None "
                                "or a message instead") from None
            if why is not None and not isinstance(why, str):
                raise SpecError(f"{self.spec.reference}: check() must return None or a message, got {why!r}")
            if why is not None and not why.strip():  # trial 45: "" passed, since it is false
                why = f"{self.name}: check() returned an empty message, which is a failure (None is a pass)"
            return why, None, None  # trial 45: shown as "error 0 ..., at 0% of its tolerance"
        got = got.reshape(self.want.shape)
        if self.scale is None:
            return self._check_exact(got)
        diff = np.subtract(got, self.want, dtype=self.want.dtype)
        np.abs(diff, out=diff)
        rel = float(np.linalg.norm(diff.ravel())) / self.want_norm
        share = np.multiply(diff, self.scale)
        used = float(share.max()) if share.size else 0.0
        if not math.isfinite(used):
            bad = int(np.count_nonzero(~np.isfinite(got)))
            if bad:
                why = f"{self.name}: {bad} of {got.size} elements are not finite (unwritten or overflow)"
                return why + self._none_written(got), math.inf, math.inf
        if self.exact_at is not None and np.any(got.ravel()[self.exact_at] != self.want.ravel()[self.exact_at]):
            used = math.inf  # an element allowed no error at all is off
        if not used <= 1.0:  # NaN included: a comparison that cannot be made fails
            return self._off(got, diff, share), rel, used
        return None, rel, used

    def _check_exact(self, got: np.ndarray) -> Verdict:
        bad = np.flatnonzero(got != self.want)
        if bad.size:
            i = int(bad[0])
            return (f"{self.name}: {bad.size} of {self.want.size} elements differ "
                    f"(first at {i}: got {got.flat[i]}, want {self.want.flat[i]}){self._none_written(got)}"), \
                float(bad.size), math.inf
        return None, 0.0, None

    def _none_written(self, got: np.ndarray) -> str:
        """Advice when every element still holds the poison the output was filled with: the
        kernels wrote elsewhere, usually an argument list in another order than the kernel's."""
        if got.size == 0 or not np.all(got.view(np.uint8) == POISON_BYTE):
            return ""
        if not np.issubdtype(got.dtype, np.floating):  # -1 or 255 is a value a kernel may write (trial 45)
            return _MAYBE_NONE_WRITTEN.format(name=self.name, value=got.flat[0])
        return _NONE_WRITTEN.format(name=self.name)

    def _off(self, got: np.ndarray, diff: np.ndarray, share: np.ndarray) -> str:
        """The message for an output off its tolerance (a failing candidate: cost is no matter)."""
        off = ~(share <= 1.0).ravel()  # NaN too
        if self.exact_at is not None:
            off[self.exact_at] |= diff.ravel()[self.exact_at] != 0
        i = int(np.flatnonzero(off)[0])
        scale = float(self.scale.flat[i]) if self.scale is not None else 0.0
        allowed = 1.0 / scale if scale > 0 else 0.0
        worst = float(share.max())  # elements allowed no error (exact_at) do not count here
        digits = 17 if self.want.dtype.itemsize > 4 else 9  # enough to tell any two values apart
        return (f"{self.name}: {int(np.count_nonzero(off))} of {got.size} elements off "
                f"(first at {i}: got {float(got.flat[i]):.{digits}g}, want {float(self.want.flat[i]):.{digits}g}, "
                + (f"allowed ±{allowed:.3g}" if allowed > 0 else "which must be exact")
                + f"; {self.rule}" + (f"; worst element {worst:.3g}x its tolerance)" if worst > 1 else ")")
                + (self._rounding_at_zero(diff, off, got.dtype) or self._rounding(diff, off, got.dtype)))

    def _rounding(self, diff: np.ndarray, off: np.ndarray, dtype: np.dtype[Any]) -> str:
        """Advice when every element off is off by rounding alone (within ROUNDING_ULPS of the
        reference): no kernel can meet such a tolerance unless it adds in the reference's order.
        ``dtype``: the kernel's output's, whose rounding counts (trial 89: a float64 reference's
        precision was taken for a float32 output's). Where only elements near 0 are off by more,
        but by no more than rounding at the output's scale, that is said as a possibility, not
        blamed on the tolerance: they may be sums that cancel, or values that small written
        wrong (trial 94: zeros written for values of 1e-6 were called rounding)."""
        info = np.finfo(dtype)
        want = np.abs(self.want.ravel()[off]).astype(np.float64)
        with np.errstate(divide="ignore", invalid="ignore"):
            ulps = diff.ravel()[off] / np.maximum(want, float(info.tiny)) / float(info.eps)
        worst = float(np.max(ulps))
        if worst <= ROUNDING_ULPS:
            return (f"; each element off is within {max(1, math.ceil(worst))} ulp of the reference, as {info.dtype} "
                    f"arithmetic in another order gives: the tolerance is {TOO_TIGHT} ({info.dtype}'s precision is "
                    f"{float(info.eps):.3g}); widen tolerance.rtol in the spec to {_wide_enough(info):.0e} or more")
        if (scale := self._at_scale(diff, off, info)) is None:
            return ""
        typical, rounding = scale
        return (f"; each element off is within rounding of the output's scale (its median magnitude is {typical:.3g}): "
                f"if those elements are sums that cancel, give tolerance.atol a value at that scale, e.g. "
                f"{rounding:.0e}; if they are values that small, the kernel is wrong there")

    def _rounding_at_zero(self, diff: np.ndarray, off: np.ndarray, dtype: np.dtype[Any]) -> str:
        """Advice when every element off is expected to be 0, so allowed no error by atol 0, and is
        off by no more than rounding at the output's scale (a sum that cancels leaves 1e-8 where
        its terms are near 1): trial 61, where nothing named the tolerance."""
        if np.any(self.want.ravel()[off] != 0) or (scale := self._at_scale(diff, off, np.finfo(dtype))) is None:
            return ""
        typical, rounding = scale
        return (f"; each element off is expected to be 0 and is within rounding of the output's values (their "
                f"median magnitude is {typical:.3g}): atol 0 allows it no error, so the tolerance is {TOO_TIGHT}; "
                f"give tolerance.atol a small value, e.g. {rounding:.0e}")


    def _at_scale(self, diff: np.ndarray, off: np.ndarray, info: np.finfo[Any]) -> tuple[float, float] | None:
        """(the output's median magnitude, rounding at that scale) where every element off is
        within that rounding; None where one is not (NaN, an unwritten element, included), or
        every expected value is 0."""
        typical = _typical(self.want)
        rounding = _wide_enough(info) * typical
        return (typical, rounding) if typical and float(np.max(diff.ravel()[off])) <= rounding else None


def _wide_enough(info: np.finfo[Any]) -> float:
    """An rtol that rounding in another order meets: ROUNDING_ULPS ulps of the output's type."""
    return ROUNDING_ULPS * float(info.eps)


def reachable(spec: KernelSpec, problem: Mapping[str, Any], name: str, want: np.ndarray, dtype: np.dtype[Any],
              bound: np.ndarray | None = None) -> str | None:
    """Why the tolerance (with ``bound``) cannot pass a correctly rounded ``dtype`` output of
    ``want``, or None: more than 1% of its nonzero elements are allowed less than half an ulp
    (trial 89: rtol 1e-9 for a float32 output; trial 94: float16 under the default 1e-5, where
    rtol 1e-9 with a wide atol or an error bound was wrongly warned of)."""
    if not np.issubdtype(dtype, np.floating) or getattr(spec.host_module(), "check", None) is not None:
        return None
    w = np.abs(np.asarray(want, dtype=np.float64)).ravel()
    nonzero = w != 0
    if not nonzero.any():
        return None
    info = np.finfo(dtype)
    allowed = allowed_error(spec, problem, want.astype(np.float64), bound).ravel()[nonzero]
    short = float(np.mean(allowed < 0.5 * float(info.eps) * w[nonzero]))
    if short <= 0.01:
        return None
    env = spec.env(problem)
    return (f"the tolerance (rtol {float(spec.rtol(env)):g}, atol {float(spec.atol(env)):g}) allows {short:.0%} of "
            f"{name}'s elements less than half an ulp of {info.dtype} (its precision is {float(info.eps):.3g}), which "
            "a correctly rounded result may be off by, so only a kernel that rounds each as the reference does "
            f"passes; give tolerance.rtol {_wide_enough(info):.0e} or more")


def _typical(want: np.ndarray) -> float:
    """The median magnitude of ``want``'s nonzero elements (0.0 where all are 0): the scale at
    which a sum that cancels rounds."""
    nonzero = np.abs(want[want != 0]).astype(np.float64)
    return float(np.median(nonzero)) if nonzero.size else 0.0


def compare(spec: KernelSpec, name: str, got: np.ndarray, want: np.ndarray,
            problem: Mapping[str, Any], bound: np.ndarray | None = None) -> Verdict:
    """Check one output once (a test, a one-off check); a tuner prepares :class:`Expected`."""
    return Expected.prepare(spec, name, want, problem, bound).check(got)


def allowed_error(spec: KernelSpec, problem: Mapping[str, Any], want: np.ndarray,
                  bound: np.ndarray | None = None) -> np.ndarray:
    """Each element's allowed |error|: atol + rtol·|want| + the reference's error bound."""
    env = spec.env(problem)
    allowed = float(spec.atol(env)) + float(spec.rtol(env)) * np.abs(want).astype(np.float64)
    return allowed + bound.reshape(allowed.shape) if bound is not None else allowed


def vacuous(spec: KernelSpec, problem: Mapping[str, Any], want: np.ndarray, bound: np.ndarray | None = None) -> bool:
    """Whether an output of zeros would pass as ``want`` (a float output, checked by the
    tolerance): the allowed error reaches every expected value that is not 0, so the check
    tells little from nothing (trial 38: a textbook worst-case bound passed a kernel 100%
    wrong, shown as "error 1 ..., at 29% of its tolerance")."""
    if not np.issubdtype(want.dtype, np.floating) or getattr(spec.host_module(), "check", None) is not None:
        return False
    magnitude = np.abs(want.astype(np.float64))
    return bool(magnitude.any() and np.all(allowed_error(spec, problem, want, bound) >= magnitude))


_NONE_WRITTEN = ("; no element was written (each still holds the poison {name} starts with): check that 'args' "
                 "lists the kernel's arguments in the order of its signature, and that the launch covers {name}")
_MAYBE_NONE_WRITTEN = ("; every element is {value}, the value {name} is filled with before it is verified: if the "
                       "kernels did not write it, check that 'args' lists the kernel's arguments in the order of its "
                       "signature, and that the launch covers {name}")
_NONE_WRITTEN_SAID = re.compile("|".join(re.escape(m).replace(re.escape("{name}"), r"[\w.]+").replace(
    re.escape("{value}"), r"-?\d+") for m in (_NONE_WRITTEN, _MAYBE_NONE_WRITTEN)))


def without_unwritten_advice(message: str) -> str:
    """``message`` without the advice that no element was written, where NaN read from a guard
    zone or a scratch buffer explains the poison's bits instead (trial 38: after a right
    "read past its end", it sent the user to check 'args')."""
    return _NONE_WRITTEN_SAID.sub("", message)
