"""The report's one self-contained HTML page: figures as PNG data URIs, no script, no network."""

from __future__ import annotations

import base64
import html
import re
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone

from .. import __version__
from ..spec import config_label
from .data import Section, Trial, variant_parameter

#: Captions of the figures, in the order a section shows them.
CAPTIONS = {
    "convergence": "Best time so far against the trial number; failed trials are marked along the top.",
    "importance": "Which parameters explain the time of the verified configurations.",
    "parameters": "Time by parameter value, the variant parameter first, then by importance.",
    "ceiling": "The best configuration against the device's ceilings (kept by autotune bench): on a roofline "
               "where the spec counts FLOPs and bytes (bytes as the spec counts them, so data reused from "
               "caches or local memory can put a kernel above the bandwidth slope), else as a share of each "
               "ceiling in a metric's unit (over 100% of a bandwidth where the problem's data fits in a cache, "
               "which the copy's does not).",
}

_STYLE = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 24px auto; max-width: 1100px; color: #222; }
h1 { font-size: 22px; } h2 { font-size: 18px; margin-top: 36px; border-top: 1px solid #ccc; padding-top: 16px; }
table { border-collapse: collapse; margin: 8px 0 16px; font-size: 12px; }
th, td { border: 1px solid #ddd; padding: 3px 8px; text-align: left; vertical-align: top; }
td.n { text-align: right; font-variant-numeric: tabular-nums; }
figure { margin: 12px 0; } figure img { max-width: 100%; border: 1px solid #eee; }
figcaption { font-size: 12px; color: #555; } .note { color: #8a5300; } code { font-size: 12px; }
nav a { margin-right: 12px; }
"""


def render(kernel: str, sections: Sequence[Section], figures: Sequence[Mapping[str, bytes]], source: str,
           notes: Sequence[Mapping[str, str]]) -> str:
    """The page: a header, then per section its totals, figures (or why one is missing) and top 10."""
    when = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    nav = "".join(f'<a href="#s{i}">{_e(s.device_name)} {_e(s.label)}</a>' for i, s in enumerate(sections))
    body = "\n".join(_section(i, s, figures[i], notes[i]) for i, s in enumerate(sections))
    return (f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>autotune report: {_e(kernel)}</title><style>{_STYLE}</style></head><body>\n"
            f"<h1>autotune report: {_e(kernel)}</h1>\n"
            f"<p>{len(sections)} stud{'y' if len(sections) == 1 else 'ies'} from <code>{_e(source)}</code>; "
            f"made {when} by autotune {__version__}.</p>\n<nav>{nav}</nav>\n{body}\n</body></html>\n")


def _e(text: object) -> str:
    return html.escape(str(text))


def _code(text: str) -> str:
    """``text`` escaped, its `commands` as <code> (trial 28: the backticks showed as they are)."""
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", _e(text))


def _section(i: int, s: Section, figures: Mapping[str, bytes], notes: Mapping[str, str]) -> str:
    stale = (f'<p class="note">Tuned with an earlier version of the spec (hash {_e(s.spec_hash)}; now '
             f'{_e(s.spec.spec_hash)}): its parameters may mean something else today.</p>' if s.stale else "")
    parts = [f'<section id="s{i}"><h2>{_e(s.device_name)} — {_e(s.label)}</h2>', stale,
             f"<p>study <code>{_e(s.study_name)}</code></p>", _totals(s)]
    for kind, caption in CAPTIONS.items():
        if kind in figures:
            data = base64.b64encode(figures[kind]).decode("ascii")
            parts.append(f'<figure class="{kind}"><img alt="{kind}" src="data:image/png;base64,{data}">'
                         f"<figcaption>{_e(caption)}</figcaption></figure>")
        elif kind in notes:
            parts.append(f'<p class="note">{_code(notes[kind])}</p>')
    parts.append(_top(s))
    return "\n".join(parts) + "</section>"


def _totals(s: Section) -> str:
    rows = [("trials", f"{len(s.trials)} measured ({len(s.ok)} verified)")]
    rows += [(f"  {status.replace('_', ' ')}", str(n)) for status, n in s.failures().items()]
    wall, rate = s.wall_s(), s.trials_per_minute()
    rows.append(("search time", f"{wall:.1f} s" + (f" ({rate:.1f} trials per minute)" if rate else "")
                 + "; the trials' own, over every run: a run's summary also counts its start-up and the "
                   "leaders' re-timing"))
    best, base = s.best, s.baseline
    if best is not None:
        rows.append(("best", f"{best.m.median_ms:.4g} ms (trial {best.number}) " + _metrics(s, best.m.median_ms)))
    if base is not None:
        rows.append(("baseline", _baseline(s, best, base)))
    if s.entry is not None:
        rows.append(("profile", _profile(s, best)))
    variant = variant_parameter(s.spec)
    if variant and s.ok:
        rows.append((f"by {variant}", _families(s, variant)))
    return "<table>" + "".join(f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>" for k, v in rows) + "</table>"


def _baseline(s: Section, best: Trial | None, base: Trial) -> str:
    """The baseline's trial, and the speed-up the run reported: from the profile, where the
    baseline was timed again beside the winner (its first timing, on a device still idle, can
    read several times slow), else from the trials' own timings, said so."""
    text = f"{base.m.median_ms:.4g} ms (trial {base.number})" if base.m.ok else base.m.status.value
    e = s.entry
    if e is not None and s.entry_ours and not e.partial and e.baseline_ms and e.time_ms > 0:
        speedup = f"the speed-up the run reported: {e.baseline_ms / e.time_ms:.2f}x"
        if base.m.ok and round(base.m.median_ms, 6) == e.baseline_ms:  # no leaders to time it beside
            return f"{text}; {speedup}"
        return text + f"; timed again beside the saved configuration: {e.baseline_ms:.4g} ms ({speedup})"
    if best is not None and base.m.ok:
        # trial 59: "their first timings" of times the rounds after the search had replaced
        again = [name for name, t in (("the best", best), ("the baseline", base)) if t.retimed]
        how = f"{' and '.join(again)} as the rounds after the search timed {'them' if len(again) > 1 else 'it'} " \
            "again" if again else "their first timings"
        return text + f"; best is {base.m.median_ms / best.m.median_ms:.2f}x faster ({how})"
    return text


def _profile(s: Section, best: Trial | None) -> str:
    """The profile's entry, and which trial measured its configuration: the run saves the
    winner of the leaders' re-timing, which need not be the fastest single measurement."""
    assert s.entry is not None
    text = f"{s.entry.time_ms:.4g} ms, {s.entry.trials} trial{'s' * (s.entry.trials != 1)}, tuned {s.entry.tuned_at}"
    if why := s.spec.unusable(s.entry):  # trial 34: a stale entry was described as current
        text += f" ({s.spec.first_use_of(s.entry)}: {why})"
    if not s.entry_ours:  # the same configuration may be among this study's trials: not its result
        return text + ("; saved by another study of this problem (another version of the spec, another --storage, "
                       "or another copy of the spec)")
    if s.entry.partial:
        text += ", partial (the run was stopped before its leaders were timed again)"
    params = s.spec.from_stored(s.entry.params, s.entry.build_flags, whole=True)
    trial = s.find(params) if params is not None else None
    if trial is None:
        return text + "; its configuration is not among this study's trials (tuned " + (
            "with another version of the spec)" if s.entry.spec_hash != s.spec_hash else "in another study database)")
    if best is not None and trial.number != best.number and best.retimed:
        return text + (f"; trial {trial.number}, picked over the fastest single measurement (trial "
                       f"{best.number}) when the leaders were timed again")
    if best is not None and trial.number != best.number:  # trial 61: said "picked over" of a trial never timed again
        return text + (f"; trial {trial.number}; trial {best.number} is faster in its one timing but was not timed "
                       "again beside it (not among the leaders a run timed again, or its run was stopped first)")
    return text + f"; trial {trial.number}"


def _families(s: Section, variant: str) -> str:
    """Each variant's best time and its number of verified trials, fastest first."""
    best: dict[object, tuple[float, int]] = {}
    for t in s.ok:
        key = t.m.params.get(variant)
        ms, n = best.get(key, (float("inf"), 0))
        best[key] = (min(ms, t.m.median_ms), n + 1)
    return "; ".join(f"{k}: {ms:.4g} ms ({n} verified)" for k, (ms, n) in sorted(best.items(), key=lambda kv: kv[1]))


def _metrics(s: Section, ms: float) -> str:
    return ", ".join(f"{v:.4g} {k}" for k, v in s.metrics(ms).items())


def _top(s: Section) -> str:
    top = s.top(10)
    if not top:
        return "<p>No configuration verified.</p>"
    head = "<tr><th>#</th><th>trial</th><th>median ms</th><th>min – max ms</th><th>spread</th><th>throughput</th>" \
           "<th>configuration</th></tr>"
    rows = []
    for rank, t in enumerate(top, 1):
        lo, hi = t.m.spread
        params = config_label(s.spec.without_flags(s.spec.active(t.m.params, s.problem)))  # as the run's lines
        flags = " ".join(s.spec.enabled_flags(t.m.params))
        rows.append(f'<tr><td class="n">{rank}</td><td class="n">{t.number}</td><td class="n">{t.m.median_ms:.4g}</td>'
                    f'<td class="n">{lo:.4g} – {hi:.4g}</td><td class="n">{100 * (hi - lo) / t.m.median_ms:.1f}%</td>'
                    f"<td>{_e(_metrics(s, t.m.median_ms))}</td><td><code>{_e(params)}</code> {_e(flags)}</td></tr>")
    once = len(s.ok) - len(s.full)  # the page's counts include them (trial 28)
    note = f"<p>{once} timed once (cut short by --prune) {'is' if once == 1 else 'are'} not ranked.</p>" * bool(once)
    return (f"<h3>Top {len(top)} configuration{'s' * (len(top) != 1)} timed in full</h3>{note}"
            f"<table>{head}{''.join(rows)}</table>")
