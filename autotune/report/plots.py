"""The report's figures, drawn with matplotlib (the ``report`` extra) and returned as PNG bytes.

matplotlib is imported here only, when a figure is drawn, and only through ``Figure`` (no
pyplot: no display, no global state); :func:`require_matplotlib` says how to install it.
"""

from __future__ import annotations

import io
import math
from collections.abc import Sequence
from typing import Any

from ..ceilings import Ceiling
from ..errors import ProblemError
from .data import COPY, FP32, Section, Trial

#: How each outcome other than ok is marked: (label, marker, colour).
MARKS = {
    "invalid": ("invalid", "x", "#7f7f7f"),
    "compile_error": ("compile error", "s", "#d62728"),
    "launch_error": ("launch error", "D", "#ff7f0e"),
    "wrong_result": ("wrong result", "X", "#e377c2"),
    "timeout": ("timeout", "v", "#8c564b"),
    "crashed": ("crashed", "*", "#000000"),
}
BEST, BASE, DEFAULT, DOTS = "#1f77b4", "#2ca02c", "#9467bd", "#aec7e8"
DPI = 100


def require_matplotlib() -> None:
    """ProblemError, in one line, where matplotlib cannot be imported."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise ProblemError('autotune report draws with matplotlib, which is not installed: '
                           'pip install -e ".[report]" from the checkout') from None


def _figure(width: float, height: float) -> Any:
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), dpi=DPI, layout="constrained")


def _png(fig: Any) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI)
    return buf.getvalue()


def convergence(s: Section) -> bytes | None:
    """Best-so-far time against trial number (log), every verified time, the baseline and the
    default, and a mark per failed or timed-once trial; None when the study holds no trial."""
    if not s.trials:
        return None
    fig = _figure(8, 4.6)
    ax = fig.add_subplot()
    ax.set_yscale("log")
    full = [t for t in s.full if not t.retimed]
    if full:
        ax.scatter([t.number for t in full], [t.m.median_ms for t in full], s=12, color=DOTS, label="verified trial")
    if again := [t for t in s.full if t.retimed]:  # trial 59: they read as the search's own times
        ax.scatter([t.number for t in again], [t.m.median_ms for t in again], s=22, marker="D", color=DOTS,
                   label="timed again after the search (the rounds' median)")
    once = [t for t in s.ok if t.m.pruned]
    if once:
        ax.scatter([t.number for t in once], [t.m.median_ms for t in once], s=16, facecolors="none",
                   edgecolors="#7f7f7f", label="timed once (pruned)")
    steps = s.best_so_far()
    if steps:
        ax.step([n for n, _ in steps], [ms for _, ms in steps], where="post", color=BEST, lw=2,
                label=f"best so far ({steps[-1][1]:.4g} ms)")
    for trial, name, colour, style in ((s.baseline, "baseline", BASE, "--"), (s.default, "default", DEFAULT, ":")):
        if trial is not None and trial.m.ok:
            ax.axhline(trial.m.median_ms, color=colour, ls=style, lw=1.2,
                       label=f"{name} {trial.m.median_ms:.4g} ms (trial {trial.number})")
    _failure_marks(ax, s.trials)
    # the marks sit in axes coordinates, which autoscaling leaves out: with no verified trial,
    # the axis would not reach them
    ax.set_xlim(0, max(t.number for t in s.trials) + 1)
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # trial 28: ticks at 0.25, 0.5, ... on a short study
    ax.set_xlabel("trial number")
    ax.set_ylabel("time (ms, log scale)")
    count = f"{len(s.trials)} trial{'s' * (len(s.trials) != 1)}"
    ax.set_title(f"{s.spec.name} {s.label}: convergence ({count})", fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    if ax.get_legend_handles_labels()[0]:  # below the axes: the failure marks run along the top
        fig.legend(fontsize=7, loc="outside lower center", ncols=4)
    return _png(fig)


def _failure_marks(ax: Any, trials: Sequence[Trial]) -> None:
    """Failed trials along the top edge of the axes (they have no time), one marker per status."""
    for status, (label, marker, colour) in MARKS.items():
        numbers = [t.number for t in trials if t.m.status.value == status]
        if numbers:
            ax.scatter(numbers, [0.97] * len(numbers), transform=ax.get_xaxis_transform(), marker=marker,
                       color=colour, s=24, clip_on=False, label=f"{label} ({len(numbers)})")


def parameters(s: Section) -> bytes | None:
    """Per varied parameter, the verified times by value: a box per value and every trial as a
    dot; the best configuration's value starred. None when no parameter varies."""
    names = s.variant_first()
    if not names:
        return None
    cols = min(4, len(names))
    rows = math.ceil(len(names) / cols)
    narrow = cols <= 2  # the title on two lines (trial 124: one panel's, 3 inches wide, cut at both ends)
    fig = _figure(max(2.4 * cols + 0.6, 4.8), 2.3 * rows + 0.4 + 0.2 * narrow)
    axes = fig.subplots(rows, cols, squeeze=False, sharey=True)
    best = s.best
    for ax, name in zip(axes.flat, names, strict=False):
        _strip(ax, s, name, best)
    for ax in list(axes.flat)[len(names):]:
        ax.set_visible(False)
    for ax in axes[:, 0]:
        ax.set_ylabel("time (ms)")
    fig.suptitle(f"{s.spec.name} {s.label}: time by parameter value{chr(10) if narrow else ' '}(verified trials, "
                 "○ timed once; ★ best)", fontsize=10 - narrow)
    return _png(fig)


def _strip(ax: Any, s: Section, name: str, best: Trial | None) -> None:
    import numpy as np

    order = next((p.values for p in s.spec.parameters if p.name == name), ())
    trials = s.applying(name)  # a configuration that ignores the parameter is not one of its values
    values = [v for v in order if any(t.m.params.get(name) == v for t in trials)]
    groups = [[t.m.median_ms for t in trials if t.m.params.get(name) == v] for v in values]
    ax.set_yscale("log")
    ax.boxplot(groups, positions=range(len(values)), widths=0.55, showfliers=False,
               medianprops={"color": BEST}, boxprops={"color": "#555555"})
    rng = np.random.default_rng(0)  # the same jitter on every report of the study
    for i, v in enumerate(values):
        for once, style in ((False, {"color": DOTS}), (True, {"facecolors": "none", "edgecolors": "#7f7f7f"})):
            times = [t.m.median_ms for t in trials if t.m.params.get(name) == v and t.m.pruned == once]
            ax.scatter(i + rng.uniform(-0.18, 0.18, len(times)), times, s=8, zorder=3, **style)
    if best is not None and best in trials and best.m.params.get(name) in values:
        ax.scatter([values.index(best.m.params[name])], [best.m.median_ms], marker="*", s=90, color="#d62728",
                   zorder=4)
    ax.set_xticks(range(len(values)), [str(v) for v in values], fontsize=7,
                  rotation=30 if sum(len(str(v)) for v in values) > 14 else 0)
    share = s.importances.get(name)
    where = next((p.when.source for p in s.spec.parameters if p.name == name and p.when is not None), None)
    note = (f"importance {share:.0%}" if share is not None else "") + (f" where {where}" if where else "")
    # the note on a line of its own: beside the name, neighbouring titles ran together (trial 70)
    ax.set_title(name + (f"\n{note}" if note else ""), fontsize=8)
    ax.grid(True, axis="y", which="both", alpha=0.3)


#: Below this many verified trials the importances are marked as a rough guide: with a few
#: trials per value, chance alone makes a parameter look like it matters.
FEW_TRIALS = 20


def importances(s: Section) -> bytes | None:
    """The parameter importances as bars, the variant parameter first; None without them."""
    names = [n for n in s.variant_first() if n in s.importances]
    if not names:
        return None
    where = s.importance_where
    label = importance_label(s)
    fig = _figure(6.5, 0.3 * len(names) + 1.0 + 0.2 * label.count("\n") + 0.2 * (len(s.full) < FEW_TRIALS))
    ax = fig.add_subplot()
    ax.barh(range(len(names)), [s.importances[n] for n in names], color=BEST)
    ax.set_yticks(range(len(names)), [f"{n} (where {where[n]})" if n in where else n for n in names], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel(label, fontsize=8)
    ax.set_title(importance_title(s), fontsize=9)
    ax.grid(True, axis="x", alpha=0.3)
    return _png(fig)


def importance_label(s: Section) -> str:
    """The importance figure's axis label: what a bar is, and which parameters were not judged
    (trial 30: one with too few trials where it applies was left out unsaid)."""
    # not normalized: a lone parameter of its kind was drawn at 0% or 100% whatever it explained (trial 70)
    # ω² of each parameter alone: where the search tried values together their shares overlap, so
    # the bars need not sum to 1 (trial 73: 307% over a TPE study)
    label = ("share of the variance of log(time) each parameter's values explain\n(shares overlap where values "
             "were tried together)")
    if s.importance_where:
        label += "\n(one with a condition: over the trials where it applies)"
    if left := [n for n in s.variant_first() if n not in s.importances]:
        label += f"\nnot judged, too few trials timed in full where it applies: {', '.join(left)}"
    return label


def importance_title(s: Section) -> str:
    """The importance figure's title: the method and how many trials it judged, marked as a rough
    guide when they are few."""
    judged = len(s.full)
    # on its own line: one line was cut off at the figure's right edge (trial 28)
    few = f"\nfew, so a rough guide (steadier from {FEW_TRIALS})" if judged < FEW_TRIALS else ""
    return f"parameter importances ({s.importance_method}, {judged} trial{'s' * (judged != 1)} timed in full){few}"


def headline_metrics(s: Section) -> tuple[str | None, str | None]:
    """The names of the spec's FLOP-rate and byte-rate metrics (None where it has none)."""
    names = [n for n, _ in s.spec.metrics]
    flop = next((n for n in names if "FLOP/s" in n), None)
    byte = next((n for n in names if "B/s" in n and "FLOP" not in n), None)
    return flop, byte


def ceiling_figure(s: Section) -> bytes | None:
    """The roofline when the spec counts FLOPs and bytes, else the achieved share of each ceiling
    in a metric's unit; None without a verified trial, or with neither a roofline nor a ceiling."""
    best = s.best
    if best is None:
        return None
    flop, byte = headline_metrics(s)
    if flop and byte:
        return _roofline(s, best, flop, byte)
    return _shares(s, best)


def _ceiling(s: Section, name: str, unit: str) -> Ceiling | None:
    return next((c for c in s.ceilings if c.name == name and c.unit == unit), None)


def _roofline(s: Section, best: Trial, flop: str, byte: str) -> bytes:
    """GFLOP/s against FLOP per byte: the best, baseline and default, under the copy-bandwidth
    slope and the FP32 roof where the profile keeps them."""
    import numpy as np

    fig = _figure(6.5, 4.2)
    ax = fig.add_subplot()
    ax.set_xscale("log")
    ax.set_yscale("log")
    first = s.metrics(best.m.median_ms)
    intensity = first[flop] / first[byte]
    xs = np.logspace(math.log10(intensity) - 2, math.log10(intensity) + 2, 200)
    bw, peak = _ceiling(s, COPY, "GB/s"), _ceiling(s, FP32, "GFLOP/s")
    roof = np.full_like(xs, math.inf)
    if bw is not None:
        roof = np.minimum(roof, bw.value * xs)
    if peak is not None:
        roof = np.minimum(roof, peak.value)
    if bw is not None or peak is not None:
        ax.plot(xs, roof, color="#333333", lw=2, label=_roof_label(bw, peak))
    for trial, name, colour, marker in _marked(s, best):
        rate = s.metrics(trial.m.median_ms)[flop]
        ax.scatter([intensity], [rate], color=colour, marker=marker, s=110 if name == "best" else 50, zorder=3,
                   label=f"{name}: {rate:.4g} {flop}" + (_share(rate, peak) if peak else ""))
    ax.set_xlabel("arithmetic intensity (FLOP per byte)")
    ax.set_ylabel(f"{flop} (log scale)")
    ax.set_title(f"{s.spec.name} {s.label}: roofline" + ("" if s.ceilings else " (no ceilings known)"), fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, loc="lower right")
    return _png(fig)


def _roof_label(bw: Ceiling | None, peak: Ceiling | None) -> str:
    parts = ([f"copy bandwidth {bw.value:.4g} GB/s"] if bw else []) + ([f"FP32 {peak.value:.4g} GFLOP/s"]
                                                                      if peak else [])
    return "ceilings: " + ", ".join(parts)


def _share(rate: float, ceiling: Ceiling) -> str:
    return f" ({rate / ceiling.value:.0%} of {ceiling.name})"


def _marked(s: Section, best: Trial) -> list[tuple[Trial, str, str, str]]:
    """The best, baseline and default trials that verified, with their colours and markers."""
    marked = [(best, "best", BEST, "*"), (s.baseline, "baseline", BASE, "o"), (s.default, "default", DEFAULT, "s")]
    return [(t, name, colour, marker) for t, name, colour, marker in marked if t is not None and t.m.ok]


def _shares(s: Section, best: Trial) -> bytes | None:
    """Bars: each metric of the best, baseline and default as a share of the ceiling in its unit."""
    pairs = [(name, c) for name, _ in s.spec.metrics for c in s.ceilings if name.split()[0] == c.unit]
    if not pairs:
        return None
    marked = _marked(s, best)
    cached = any(c.unit.startswith("GB/s") and s.metrics(trial.m.median_ms)[name] > c.value
                 for name, c in pairs for trial, *_ in marked)
    fig = _figure(6.5, 0.55 * len(pairs) * len(marked) + 1.2 + 0.3 * cached)
    ax = fig.add_subplot()
    rows = [(f"{name} vs {c.name}", trial, who, colour, s.metrics(trial.m.median_ms)[name] / c.value)
            for name, c in pairs for trial, who, colour, _ in marked]
    ax.barh(range(len(rows)), [100 * r[4] for r in rows], color=[r[3] for r in rows])
    ax.set_yticks(range(len(rows)), [f"{who}: {what}" for what, _, who, _, _ in rows], fontsize=7)
    for i, row in enumerate(rows):
        ax.text(100 * row[4], i, f" {100 * row[4]:.1f}%", va="center", fontsize=7)
    ax.invert_yaxis()
    ax.axvline(100, color="#333333", lw=1)
    ax.set_xlim(0, max(110, 115 * max(r[4] for r in rows)))
    # (trial 124: 199% of the copy bandwidth, unexplained; bench says why, the report did not)
    ax.set_xlabel("% of the device's ceiling (measured by autotune bench)" + (
        "\nover 100% of a bandwidth: this problem's data fits in a cache,\nwhich the copy's does not "
        "(a larger size measures memory)" if cached else ""), fontsize=8 if cached else None)
    ax.set_title(f"{s.spec.name} {s.label}: share of the ceiling", fontsize=10)
    return _png(fig)
