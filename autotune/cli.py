"""Command line: argument parsing and printing only; the work happens in the library."""

from __future__ import annotations

import argparse
import contextlib
import errno
import importlib.util
import io
import json
import logging
import math
import os
import re
import shlex
import signal
import sys
import warnings
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, NoReturn

from . import __version__, _entry, settings, stops
from .errors import (
    AutotuneError,
    AutotuneWarning,
    DeviceError,
    OptionError,
    ProblemError,
    ProfileError,
    ProfileNotSaved,
    TuningInterrupted,
    clipped,
    own_warnings,
)
from .proposer import Sampler

_EXIT_ERROR, _EXIT_USAGE = 1, 2
_STOPPED_BY = 128  # + the signal's number, as a shell reports a process a signal ended


def parse_size(text: str, size_keys: Sequence[str]) -> dict[str, str]:
    """``1024`` → every size key; ``1024x512x256`` → size keys in order; ``M=512,layout=col``.

    Example:
        >>> parse_size("64x32x16,layout=col", ["M", "N", "K"])
        {'M': '64', 'N': '32', 'K': '16', 'layout': 'col'}
    """
    out: dict[str, str] = {}
    named: set[str] = set()  # keys given as key=value (a size for all, then one of them, is fine)
    bare = ""  # the item that gave every size key
    if not any(p.strip() for p in text.split(",")):
        raise ProblemError(f"--size {text!r} names no size; use e.g. {_size_examples(size_keys)}")
    parts = [p.strip() for p in text.split(",")]
    if "" in parts:  # as --device does: a doubled comma is likelier a slip than nothing
        raise ProblemError(f"--size {text!r} has an empty item; separate items with single commas")
    for part in parts:
        if "=" in part:
            key, _, value = (x.strip() for x in part.partition("="))
            if key in named:
                raise ProblemError(f"--size {text!r} gives {key} twice; give each key once")
            out[key] = value
            named.add(key)
            continue
        if re.fullmatch(r"0x[0-9a-f]+", part.lower()):  # trial 103: read as 0 by 10000, "2 dimensions"
            raise ProblemError(f"--size {text!r}: {part!r} is hexadecimal; write sizes in decimal "
                               f"({int(part, 16)})")
        dims = part.lower().split("x")
        if not all(re.fullmatch(r"[0-9]+", d) for d in dims):  # (\d takes other scripts' digits: trial 107)
            raise ProblemError(f"--size {text!r}: {part!r} is not a size; use e.g. {_size_examples(size_keys)}")
        if len(dims) not in (1, len(size_keys)):
            raise ProblemError(
                f"--size {text!r}: {len(dims)} dimensions given, this kernel has "
                f"{len(size_keys)} ({'x'.join(size_keys)})")
        # trial 33: `K=64,128` tuned K=128, and `128,256` 256: a later item overrode silently
        if bare and len(parts) == len(size_keys) > 1 and all(p.isdigit() and p.isascii() for p in parts):
            # trial 113: `2048,512` for W and H was told "e.g. 2048,H=512"
            raise ProblemError(f"--size {text!r}: sizes in order are joined by x ({'x'.join(parts)}), or give each "
                               f"as key=value ({','.join(f'{k}={v}' for k, v in zip(size_keys, parts, strict=True))})")
        if bare:
            raise ProblemError(f"--size {text!r} gives the sizes twice ({bare}, then {part}); give them once, "
                               f"then key=value items for single keys, e.g. {bare},{size_keys[-1]}={dims[-1]}")
        clash = next((k for k in size_keys if k in named), None)
        if clash:
            raise ProblemError(f"--size {text!r} gives {clash} twice ({clash}={out[clash]}, then {part}); give "
                               f"the sizes first, then the key: {part},{clash}={out[clash]}")
        bare = part
        out.update(zip(size_keys, dims * len(size_keys) if len(dims) == 1 else dims, strict=False))
    return out


def _size_examples(size_keys: Sequence[str]) -> str:
    """Sizes written as this kernel takes them (trial 70: `layout=col` offered for a transpose).

    >>> _size_examples(["M", "N", "K"]), _size_examples(["N"])
    ('1024, 1024x512x256 or M=1024', '1024 or N=1024')
    """
    dims = "x".join(str(1024 >> i) for i in range(len(size_keys)))
    return f"1024, {dims} or {size_keys[0]}=1024" if len(size_keys) > 1 else f"1024 or {(size_keys or ['N'])[0]}=1024"


def _number(kind: type) -> Any:
    """An argparse type that says what is wrong with a non-number (ranges: TuneOptions)."""
    def parse(text: str) -> Any:
        try:
            return kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{text!r} is not {'an integer' if kind is int else 'a number'}") from None
    return parse


def _given(advice: str) -> Any:
    """An argparse type for an option whose empty value is a mistake, not its default."""
    def parse(text: str) -> str:
        if not text.strip():
            raise argparse.ArgumentTypeError(f"is empty; {advice}")
        return text
    return parse


class _Once(argparse.Action):
    """An option given at most once: a second ``-s M=256 -s N=128`` replaced the first without a
    word (trial 110), as a second ``-d`` would; the error shows the one option that means both,
    where there is one."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        before = getattr(namespace, self.dest, None)
        if before is not None and before != values:
            both = f", e.g. {option_string or self.option_strings[0]} {before},{values}" if self.joins else ""
            raise argparse.ArgumentError(self, f"given twice ({before!r}, then {values!r}); give it once{both}")
        setattr(namespace, self.dest, values)

    #: whether the two values, joined by a comma, mean both: devices for a run, a worker each
    joins = True


class _OnceAlone(_Once):
    """:class:`_Once` for a command that takes one device."""

    joins = False


class _SizeOnce(argparse.Action):
    """--size given several times: its items are joined, as one list (trial 114: `-s M=512 -s N=256
    -s K=128` was refused with a fix that dropped K), each repeated item once (trial 115), the sizes
    first (`-s K=128 -s 512` is `512,K=128`); two lists of sizes are refused (trial 110: the last
    replaced the first without a word; `-s 512,1024` is itself refused). A key given two values is
    left to :func:`parse_size`, which says so."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        before = getattr(namespace, self.dest, None)
        if before is None:  # one --size: parse_size judges it (trial 117: "given twice (None, ...)" of `2048,512`)
            setattr(namespace, self.dest, values)
            return
        items = [i.strip() for i in f"{before},{values}".split(",")]
        bare = list(dict.fromkeys(i for i in items if i and "=" not in i))
        if len(bare) > 1 and any("=" not in i for i in before.split(",")):
            raise argparse.ArgumentError(self, f"given twice ({before!r}, then {values!r}); give the sizes once")
        setattr(namespace, self.dest, ",".join(dict.fromkeys(bare + [i for i in items if "=" in i or not i])))


def _selector(text: str) -> str:
    """--device: not empty, nor a list with an empty part (trial 91: `0:0,` was exit 1, `""` 2)."""
    given = _given("give an index such as 0:0 or part of a device's name (see `autotune devices`), "
                   "or leave --device out for the default")(text)
    if "," in given and not all(part.strip() for part in given.split(",")):
        raise argparse.ArgumentTypeError(f"{text!r} has an empty selector between its commas; give selectors such "
                                         "as 0:0,1:0")
    if "," in given and any(part.strip().lower() == "all" for part in given.split(",")):  # (trial 108: exit 1)
        raise argparse.ArgumentTypeError(f"{text!r}: 'all' stands alone (every GPU that builds, else every CPU "
                                         "device); give either 'all' or a list of selectors such as 0:0,1:0")
    return given


_storage = _given("give an optuna storage URL (e.g. sqlite:///studies.db) or :memory:, or leave --storage "
                  "out for the default")
_folder = _given("give a folder, or leave --output out for ./autotune-report-KERNEL")


_MISSING_VALUE = re.compile(r"argument (\S+): expected one argument")


class _ArgumentParser(argparse.ArgumentParser):
    """Usage errors as one line that points to --help. No abbreviated options: replay's
    ``--seed 3`` would be taken as ``--seeds 3``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **{"allow_abbrev": False, **kwargs})

    def error(self, message: str) -> None:  # type: ignore[override]
        if (missing := _MISSING_VALUE.fullmatch(message)) and (hint := self._dash_value(missing[1].split("/"))):
            message += hint
        self.exit(2, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")

    def parse_known_args(self, args: Any = None, namespace: Any = None) -> Any:
        self._given = list(sys.argv[1:] if args is None else args)
        return super().parse_known_args(args, namespace)

    def _dash_value(self, options: list[str]) -> str:
        """Advice where an option's value starts with '-' (``--target -inf``): argparse reads it
        as an option and says the option expected a value."""
        given = getattr(self, "_given", [])
        for at, token in enumerate(given[:-1]):
            if token in options and given[at + 1].startswith("-") and given[at + 1] != "--":
                return f"; a value that starts with '-' is written {options[-1]}={given[at + 1]}"
        return ""

    def exit(self, status: int = 0, message: str | None = None) -> NoReturn:
        """As argparse's; a usage error whose message cannot be written keeps its status 2."""
        if message and sys.stderr is not None:  # closed (2>&-): not into stdout (trial 79)
            try:
                self._print_message(message, sys.stderr)
            except OSError:
                pass
        sys.exit(status)

    def _print_message(self, message: str, file: Any = None) -> None:
        """As argparse's, less its silence about a failed write (trial 71: `--help >/dev/full`
        exited 0): main() says it."""
        if not message:
            return
        if (file := file or sys.stdout) is None:  # started with `>&-` (trial 76: exit 0, nothing said)
            raise OSError(errno.EBADF, "standard output is closed")
        file.write(message)
        file.flush()


def build_parser() -> argparse.ArgumentParser:
    parser = _ArgumentParser(
        prog="autotune",
        description="Tune OpenCL kernels: verified variants, optuna search, per-device profiles.")
    parser.add_argument("--version", action="version", version=f"autotune {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND",
                                parser_class=_ArgumentParser)

    run = sub.add_parser("run", help="tune a kernel on a device and save the best to its profile",
                         description="Tune KERNEL (a built-in name or your spec YAML) and save the "
                         "best verified configuration to the device's profile. Running the same "
                         "command again resumes the study and adds trials.")
    run.add_argument("kernel", metavar="KERNEL|PATH.yaml")
    run.add_argument("-s", "--size", default=None, action=_SizeOnce,
                     help="problem: 1024 (all sizes), 1024x512x256 (sizes in order) or "
                     "key=value pairs, e.g. M=512,layout=col; default: the spec's problem")
    run.add_argument("-d", "--device", type=_selector, action=_Once,
                     help="device selector (see `autotune devices`); default: "
                     "$AUTOTUNE_DEVICE, else the first GPU that builds, else the first CPU device that "
                     "builds. Several: 'all' (every GPU that builds, else every CPU device) or selectors "
                     "separated by commas: one worker process per device, devices of one model on one study")
    run.add_argument("-n", "--trials", type=_number(int), default=40,
                     help="new configurations to measure (invalid and repeated ones do not count; one "
                     "that timed out before and is measured again under a longer --max-time-per-config "
                     "does; with several devices, the budget of each study; default 40)")
    run.add_argument("-t", "--timeout", type=_number(float), default=150.0,
                     help="end the run after this many seconds; a candidate still running then is "
                     "stopped and measured again next time (default 150)")
    run.add_argument("--sampler", choices=[s.value for s in Sampler], default=Sampler.TPE.value,
                     help="tpe (default; after random start-up draws up to 3-5 measurements, the baseline, "
                     "default and hints counted (where the search has no hints or earlier winners, each "
                     "draw covers pairs of values no earlier draw held, and many varied parameters make up "
                     "to 12), candidates in turn from TPE over the "
                     "valid configurations, a step beside the best, TPE, and the configuration a "
                     "regression of log time predicts fastest), random (uniform over the valid "
                     "configurations), or grid (every valid configuration in order)")
    run.add_argument("--seed", type=_number(int), help="seed for the sampler and the inputs")
    run.add_argument("--storage", type=_storage, help="optuna storage URL (default: SQLite in $AUTOTUNE_HOME; "
                     ":memory: for a study that is not kept). Runs started on one study (on one host or "
                     "several, e.g. postgresql://HOST/DB) cooperate: no configuration is measured twice")
    run.add_argument("--study-trials", type=_number(int), metavar="N",
                     help="stop when the study holds N measured configurations, every worker's counted, "
                     "those being measured too (a budget for workers that share a study)")
    run.add_argument("--study-timeout", type=_number(float), metavar="SECONDS",
                     help="stop SECONDS after the study's first worker ever started (a deadline for "
                     "workers that share a study; on a study resumed later it may already have passed)")
    run.add_argument("--max-time-per-config", type=_number(float), metavar="SECONDS",
                     help="kill and record as timeout a candidate that takes longer to build, "
                     "verify and time, the baseline too (default: max(30 s, 10x the baseline's), and 300 s for the "
                     "baseline); a later "
                     "run with a longer limit measures the study's timeouts again")
    run.add_argument("--no-isolation", action="store_true",
                     help="measure in this process (faster start, but a hung or crashing "
                     "kernel stops the run, and --max-time-per-config cannot apply)")
    run.add_argument("--compile-ahead", type=_number(int), metavar="N",
                     help="build upcoming candidates in the background while one is timed: the next "
                     "N known in advance, and in the TPE phase the next one, then chosen before this one "
                     "is measured (default: 2 on GPUs, 0 on CPU devices, whose kernels the builds would slow)")
    run.add_argument("--prune", type=_number(float), default=3.0, metavar="FACTOR",
                     help="stop timing a candidate when its first two timed launches (after the "
                     "warm-up) both take over FACTOR times the best so far, which it cannot beat "
                     "(default 3; 0: time every candidate in full)")
    run.add_argument("--no-save", action="store_true", help="do not write the profile")
    run.add_argument("--no-warm-start", action="store_true",
                     help="where this device has no tuned entry for the kernel, do not start from other "
                     "devices' winners (the default measures up to three of them first)")
    run.add_argument("-q", "--quiet", action="store_true", help="print only the summary")

    rp = sub.add_parser("replay", help="tune against recorded spaces (Kernel Tuner cache files), no device",
                        description="Run the tuning loop against each recorded space: a Kernel Tuner "
                        "cache file (.json or .json.gz) answers every measurement, so search "
                        "strategies can be compared in seconds. Reports how many configurations "
                        "were measured until the best came within --target of the recorded optimum. "
                        "A space's valid configurations are those the file records as built, its "
                        "recorded build and launch failures included (a search may measure them); "
                        "'measured' counts distinct configurations, failures included.")
    rp.add_argument("cache", nargs="*", metavar="CACHE_FILE")  # at least one: _cmd_replay says where it went
    rp.add_argument("-n", "--trials", type=_number(int), default=400,
                    help="stop a search after this many measured configurations (default 400); as run's "
                         "--trials, it also caps the random start-up configurations at a third of N (at least "
                         "3), so a search of -n 30 on a space of 10 varied parameters (12 start-up draws "
                         "otherwise) is not the first 30 of a longer one")
    rp.add_argument("--sampler", choices=[s.value for s in Sampler], default=Sampler.TPE.value,
                    help="as for run (default tpe)")
    rp.add_argument("--seeds", type=_number(int), default=1,
                    help="replay with SEEDS seeds, from --seed on, and summarize (default 1)")
    rp.add_argument("--seed", type=_number(int), default=0,
                    help="the first seed (default 0): --seed 9 replays seed 9 alone, as a run of "
                    "--seeds 10 replays it")
    rp.add_argument("--target", type=_number(float), default=5.0, metavar="PERCENT",
                    help="within this many percent of the optimum counts as found (default 5)")
    rp.add_argument("--warm-start", nargs="+", action="extend", default=[], metavar="CACHE_FILE",
                    help="measure first the fastest configurations of up to three of these "
                    "recordings: other devices' of the same kernel (the same parameters), as run "
                    "starts from other devices' winners where the device has none; it takes every "
                    "file that follows it, so give it after the CACHE_FILEs (given twice, both lists)")
    listing = sub.add_parser("list", help="list the built-in kernels")
    listing.add_argument("--json", action="store_true", help=_JSON_HELP)
    show = sub.add_parser("show", help="show a device's tuned profile as a table")
    show.add_argument("--json", action="store_true", help=_JSON_HELP)
    show.add_argument("kernel", nargs="?", help="only this kernel (a name, or the path of your own spec YAML)")
    show.add_argument("-d", "--device", type=_selector, action=_OnceAlone,
                      help="device selector (default as for run), or a profile's file name, with or without "
                           ".yaml (or a part of it that names one, such as h200), to show the profile of a device "
                           "not present here")
    devices = sub.add_parser("devices", help="list OpenCL devices, their selectors and whether "
                             "each can build kernels")
    devices.add_argument("--json", action="store_true", help=_JSON_HELP)
    devices.add_argument("--recheck", action="store_true",
                         help="check each device again (build the check kernels, launch one) instead of "
                              "using the cached result")
    probe = sub.add_parser("probe", help="measure the cost of an empty kernel launch on a device")
    probe.add_argument("-d", "--device", type=_selector, action=_OnceAlone, help="device selector (default as for run)")
    probe.add_argument("-n", "--repeats", type=_number(int), default=1000,
                       help="launches per batch, 1 to 100,000 (default: 1000)")
    bench = sub.add_parser("bench", help="measure the tuned configuration beside the device's "
                           "ceilings (copy bandwidth, FP32 FMA rate; for matmul cuBLAS on a GPU, "
                           "numpy on a CPU)",
                           description="Verify and time the configuration load_kernel would use (at a size "
                           "not tuned, it is chosen as load_kernel's first use chooses it, and that pick is saved "
                           "to the profile) and the spec's baseline, beside the ceiling the spec names, measured "
                           "in the same run; the device ceilings measured are kept in its profile.")
    bench.add_argument("kernel", metavar="KERNEL|PATH.yaml")
    bench.add_argument("-s", "--size", default=None, action=_SizeOnce, help="problem, as for run")
    bench.add_argument("-d", "--device", type=_selector, action=_OnceAlone, help="device selector (default as for run)")
    report = sub.add_parser("report", help="write an HTML page (and PNG figures) of a kernel's tuning studies",
                            description="Read KERNEL's studies from the study database (and the device "
                            "profiles) and write one self-contained HTML page, with its figures also as PNG "
                            "files: convergence with failed trials marked, time by parameter value, parameter "
                            "importances, the best against the device's ceilings, the top 10 and the totals. "
                            "One section per study: every problem and device tuned, unless -s or -d narrow "
                            "it. Needs matplotlib: pip install -e \".[report]\" from the checkout.")
    report.add_argument("kernel", metavar="KERNEL|PATH.yaml")
    report.add_argument("-s", "--size", default=None, action=_SizeOnce,
                        help="only this problem, as for run; default: every problem with a study")
    report.add_argument("-d", "--device", type=_selector, action=_OnceAlone,
                        help="only this device: its slug as in the study names and profile file names (or "
                        "a part of it that names one, e.g. h200), or a selector of a device on this machine; "
                        "default: every device")
    report.add_argument("-o", "--output", type=_folder, metavar="DIR", help="folder for index.html and the PNG files "
                        "(default: ./autotune-report-KERNEL)")
    report.add_argument("--storage", type=_storage, metavar="URL",
                        help="optuna storage URL the studies are in (default: SQLite in $AUTOTUNE_HOME)")
    for command in sub.choices.values():  # so that an unknown option is reported by its command
        command.set_defaults(command_parser=command)
    return parser


def console() -> int:
    """The ``autotune`` command: :func:`main`, after which a stop while the interpreter shuts
    down (it waits for the measuring worker) is ignored: the command's work is done (trial 33:
    a Ctrl-C after a complete run's summary exited 130, as if interrupted)."""
    status = main()
    # ignored, not handled: Python sets its own handlers back to the default as it shuts down
    for s in stops.signals():
        signal.signal(s, signal.SIG_IGN)
    return status


def main(argv: Sequence[str] | None = None) -> int:
    given = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    first = given[0].split("=")[0] if given else ""
    if first in _command_options(parser) and first not in parser._option_string_actions:
        # trial 76: `autotune -d 0:0 show` was "invalid choice: '0:0'" (an option no command
        # has is left to argparse: trial 79)
        _say(f"autotune: error: {first} goes after the command: autotune COMMAND {first} ... (see `autotune --help`)")
        return _EXIT_USAGE
    try:
        args, unknown = parser.parse_known_args(argv)
    except BrokenPipeError:  # --help's reader left: as for any command's output
        _to_devnull(sys.stdout)
        return 0
    except OSError as exc:  # --help or --version could not be written
        _say(f"autotune: error: cannot write standard output ({exc.strerror})")
        _to_devnull(sys.stdout)
        return _EXIT_ERROR
    if unknown:  # (an option of a command given before it was answered above)
        args.command_parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    for stream in (sys.stdout, sys.stderr):  # Σ and µ in an ASCII locale: '?', not a traceback (trial 34)
        if isinstance(stream, io.TextIOWrapper):
            stream.reconfigure(errors="replace")
    previous = sys.stdout
    closed = previous is None  # started with `>&-`: Python has no sys.stdout (trial 39: a traceback)
    if closed:
        previous = open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115 - the process's stdout from now on
    sys.stdout = out = _Stdout(previous, carry_on=args.command in _WORK)
    # a stop lands anywhere, inside SQLAlchemy too, which then logs "Error closing cursor" with a
    # traceback through Python's last-resort handler (trial 25); its errors that matter are
    # raised, and autotune says them in one line
    quiet_sql = logging.NullHandler()
    logging.getLogger("sqlalchemy").addHandler(quiet_sql)
    try:
        with stops.stop_signals(), warnings.catch_warnings():  # a SIGTERM before a run starts too
            _entry.command_started()  # its handlers are set: a stop after them changes no outcome
            warnings.showwarning = _one_line_warnings(warnings.showwarning)
            own_warnings()  # the command's messages, whatever -W or PYTHONWARNINGS say
            for message in settings.passed_over():
                _warn(message)
            if closed:
                out.write_failed(OSError(errno.EBADF, "standard output is closed"))
            status = _COMMANDS[args.command](args)
        return status if out.lost is None else _output_lost(args.command, out.lost, status, previous)
    except TuningInterrupted as exc:
        _say(_interrupted(exc.args[0], getattr(args, "storage", None), not getattr(args, "no_save", False)))
        return _STOPPED_BY + exc.signum
    except OptionError as exc:  # as argparse's own usage errors (trial 21: two prefixes for one kind)
        _say(f"autotune {args.command}: error: {exc} (see `autotune {args.command} --help`)")
        return _EXIT_USAGE
    except AutotuneError as exc:
        _say(f"autotune: error: {exc}")
        return _EXIT_ERROR
    except KeyboardInterrupt:  # before a run had started (or in a command that is not one)
        _say("autotune: interrupted")
        return _STOPPED_BY + stops.last_stop_signal()  # a SIGTERM a handler turned into this
    except _OutputLost as exc:  # `autotune list | head`: a command whose work is its output stops
        return _output_lost(args.command, exc.error, 0, previous)
    finally:
        sys.stdout = previous
        logging.getLogger("sqlalchemy").removeHandler(quiet_sql)


def _count(n: int, thing: str) -> str:
    """``1 trial``, ``2 trials``."""
    return f"{n} {thing}{'s' * (n != 1)}"


def _interrupted(report: Any, storage: str | None, save: bool) -> str:
    """The line a stopped run ends with: what was saved, and whether the study can resume."""
    n = _count(report.measured, "trial")
    # a run stopped before it measured anything saves the study's best, from earlier runs
    whose = "the study's best so far" if report.measured == 0 else "best so far"
    saved = _saved(report, whose, save)
    if storage == ":memory:":
        return f"autotune: interrupted after {n}; {saved}; the study was in memory (--storage :memory:): not kept"
    if not report.study_trials:
        return f"autotune: interrupted after {n}; {saved}; the study has no trials yet: the same command starts it"
    return f"autotune: interrupted after {n}; {saved}; the study keeps its trials: run the same command again to resume"


def _saved(report: Any, whose: str, save: bool) -> str:
    """What became of ``whose`` best at a stop: saved as partial, kept out by a faster entry
    (trial 28: that read "saved"), or not written."""
    if report.profile_path is None:
        return ("profile not written (--no-save)" if not save else
                f"{whose} not saved: {report.profile_verdict}" if report.profile_verdict else
                "no verified configuration to save")
    if str(report.profile_verdict).startswith("kept"):
        if report.profile_kept is None:
            from .tuner import kept_entry

            return f"{whose} not saved: {report.profile_path} {kept_entry(report.profile_verdict)}"
        return f"{whose} not saved: {report.profile_path} {_verdict(report)}"
    return f"{whose} saved to {report.profile_path} (partial; {_verdict(report)})"


def _one_line_warnings(show: Any) -> Any:
    """A warnings.showwarning that prints autotune's own warnings as one line, like its errors
    (Python's form adds a source line), and hands the others to ``show``."""
    def one_line(message: Warning | str, category: type[Warning], filename: str, lineno: int,
                 file: Any = None, line: str | None = None) -> None:
        if issubclass(category, AutotuneWarning):
            _warn(message)
        else:
            show(message, category, filename, lineno, file, line)
    return one_line


def _warn(message: Warning | str) -> None:
    _say(f"autotune: warning: {message}")


def _say(line: str) -> None:
    """``line`` on stderr; where stderr's reader left too (`run 2>&1 | head -1`, trial 52: exit
    status 1), nothing: a warning must not end the work it is about. Where stderr is closed
    (``2>&-``: sys.stderr is None), nothing either: print would write it to stdout, into the
    JSON a script reads there (trial 57)."""
    if sys.stderr is None:
        return
    try:
        print(line, file=sys.stderr, flush=True)
    except OSError:
        with contextlib.suppress(OSError, ValueError):
            _to_devnull(sys.stderr)


def _to_devnull(stream: Any) -> None:
    """Point ``stream``'s descriptor at /dev/null, so that later writes and the interpreter's
    last flush at exit do not fail again."""
    try:
        fileno = stream.fileno()
    except (AttributeError, OSError):  # no descriptor (a test's StringIO): nothing to point
        return
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, fileno)
    os.close(null)


#: Commands whose work outlives their output (a run's trials and profile, bench's picks, a
#: report's files): where standard output fails they carry on without it (trial 33: `run | head`
#: ended the run at once, with exit status 0 and nothing saved).
_WORK = frozenset({"run", "bench", "report"})


class _OutputLost(Exception):
    """Standard output failed (its reader closed the pipe, or a full disk): ``error``."""

    def __init__(self, error: OSError) -> None:
        super().__init__(error)
        self.error = error


class _Stdout:
    """Standard output, with a failure on it told apart from one anywhere else (a broken pipe of
    a worker's is a bug, and keeps its traceback). With ``carry_on`` a failure is kept in
    ``lost`` and later output is dropped; without, it raises _OutputLost."""

    def __init__(self, stream: Any, carry_on: bool = False) -> None:
        self._stream = stream
        self._carry_on = carry_on
        self.lost: OSError | None = None

    def write(self, text: str) -> int:
        if self.lost is None:
            try:
                return int(self._stream.write(text))
            except OSError as exc:
                self._failed(exc)
        return len(text)

    def flush(self) -> None:
        if self.lost is None:
            try:
                self._stream.flush()
            except OSError as exc:
                self._failed(exc)

    def write_failed(self, exc: OSError) -> None:
        """Take ``exc`` as a failure of the next write (a stream that is closed from the start)."""
        self._failed(exc)

    def _failed(self, exc: OSError) -> None:
        if not self._carry_on:
            raise _OutputLost(exc) from None
        self.lost = exc

    def __getattr__(self, name: str) -> Any:
        # the rest of the stream's interface (trial 39: a reference module's sys.stdout.isatty()
        # raised AttributeError, this method having stood after a return elsewhere)
        return getattr(self._stream, name)


def _output_lost(command: str, error: OSError, status: int, stream: Any) -> int:
    """The exit status once standard output failed, said on stderr where the command went on
    without it. Its descriptor goes to /dev/null (:func:`_to_devnull`)."""
    _to_devnull(stream)
    left = isinstance(error, BrokenPipeError)
    if command in _WORK:
        why = "its reader left" if left else f"cannot write it: {error.strerror}"
        _warn(f"standard output stopped ({why}); `{command}` went on to its end without printing")
    elif not left:
        _say(f"autotune: error: cannot write standard output ({error.strerror})")
    return status if left or status else _EXIT_ERROR


def _spec_and_problem(args: argparse.Namespace) -> tuple[Any, dict[str, str]]:
    """The spec named on the command line and its ``--size`` overrides."""
    from . import spec as specs
    from .lookup import load_spec

    spec = load_spec(args.kernel)
    for warning in specs.lint(spec):
        _warn(warning)
    if args.size is None:
        return spec, {}
    keys = [k.name for k in spec.problem if k.is_size]
    problem = parse_size(args.size, keys)
    bare = [p.strip() for p in args.size.split(",") if re.fullmatch(r"\s*\d+\s*", p)]
    if bare and len(keys) > 1:  # one number for every size key: say so if the spec refuses it
        try:
            spec.resolve_problem(problem)
        except ProblemError as exc:
            try:  # the hint only where naming one key would do
                spec.resolve_problem({keys[0]: bare[0]})
            except ProblemError:
                raise exc from None
            raise ProblemError(f"{exc}; -s {bare[0]} sets every size key ({', '.join(keys)}): name the one "
                               f"you mean, e.g. -s {keys[0]}={bare[0]}") from None
    return spec, problem


def _cmd_run(args: argparse.Namespace) -> int:
    from .device import several
    from .settings import default_device_selector
    from .tuner import TuneOptions

    spec, problem = _spec_and_problem(args)
    options = TuneOptions(trials=args.trials, timeout_s=args.timeout, sampler=Sampler(args.sampler),
                          seed=args.seed, storage=args.storage, device=args.device,
                          max_time_per_config=args.max_time_per_config,
                          isolate=not args.no_isolation, save=not args.no_save,
                          compile_ahead=args.compile_ahead, prune=args.prune,
                          study_trials=args.study_trials, study_timeout_s=args.study_timeout,
                          warm_start=not args.no_warm_start)
    # $AUTOTUNE_DEVICE may name several devices too; one is left to select(), whose errors say
    # where a selector came from
    chosen = args.device or default_device_selector()
    if chosen and several(chosen):
        given = "--device" if args.device else "$AUTOTUNE_DEVICE"
        return _run_together(spec, replace(options, device=chosen), problem, args.quiet, given)
    return _run_one(spec, options, problem, args.quiet)


def _run_one(spec: Any, options: Any, problem: dict[str, str], quiet: bool) -> int:
    """An ordinary run on one device: progress, then the summary."""
    from .spec import problem_label
    from .tuner import tune

    def summary(report: Any) -> str:  # a blank line parts it from the progress lines
        return ("" if quiet else "\n") + format_report(report)

    try:
        report = tune(spec, options, problem, progress=None if quiet else _progress(spec))
    except ProfileNotSaved as exc:  # the run's summary, then the error
        print(summary(exc.report))
        raise
    stops.hold()  # the run is saved: a stop now must not end its summary as "interrupted"
    print(summary(report))
    if report.best is not None:
        return 0
    # trial 57: exit 1 with nothing on stderr, where a script looks for why
    _say(f"autotune: error: no verified configuration of {spec.name} at {problem_label(report.problem)}: "
         f"{_no_best(report).replace(' (failures below)', '')}; the summary above says why")
    return _EXIT_ERROR


def _run_together(spec: Any, options: Any, problem: dict[str, str], quiet: bool, given: str) -> int:
    """``run -d all`` or ``-d A,B``: a worker per device, one merged progress, a summary per study
    (``given``: where the devices were named, --device or $AUTOTUNE_DEVICE)."""
    from .device import select_many
    from .fleet import groups, require_shared, tune_together

    infos = select_many(options.device, given)
    if len(infos) == 1:  # `-d all` on a host with one device: an ordinary run
        return _run_one(spec, replace(options, device=infos[0].selector), problem, quiet)
    require_shared(options, infos)
    for sel in sorted(sel for sel, n in Counter(i.selector for i in infos).items() if n > 1):
        _warn(f"device {sel} is named more than once: its workers time kernels on it at the same time, so "
              "each one's times include the others' load")
    if len(cpus := sorted({i.selector for i in infos if not i.is_gpu})) > 1:  # trial 110: `-d all` on a CPU host
        _warn(f"devices {' and '.join(cpus)} are OpenCL runtimes of this host's CPU, whose cores they share: their "
              "workers time kernels at the same time, so each one's times include the others' load; tune them one "
              f"after another (-d {cpus[0]}, then -d {cpus[1]}) for times to trust")
    studies = groups(infos)
    for slug, members in studies.items() if not quiet else ():  # -q: the summary only (trial 96)
        print(f"study for {slug}: {len(members)} worker{'s' * (len(members) > 1)} ({', '.join(members)})"
              + ("; devices of other models tune studies of their own" if len(studies) > 1 else ""))
    printers: dict[str, Any] = {}

    def progress(label: str, event: str, m: Any, state: Any) -> None:
        if not quiet:
            printers.setdefault(label, _progress(spec, label))(event, m, state)

    results = tune_together(spec, options, problem, infos, progress)
    stops.hold()  # each study's best is saved: a stop now must not cut the summaries short
    for members in studies.values():
        mine = [r for r in results if r.label in members]
        done = [r.report for r in mine if r.report is not None]
        best = min(mine, key=lambda r: r.report.best.median_ms if r.report and r.report.best else math.inf,
                   default=None)
        if best is not None and best.report is not None:
            print("\n" + format_report(best.report, worker=best.label if len(done) > 1 else None))
        if len(done) > 1:
            wall = max(r.wall_s for r in done)
            total, held = sum(r.measured for r in done), max(r.study_trials for r in done)
            print(f"  together    {total} measured by {len(done)} workers in {wall:.1f} s "
                  f"({60 * total / wall if wall else 0:.1f} trials/min); the study holds {held}")
        for r in mine:
            rr = r.report
            what = (r.error if rr is None else f"{rr.measured} measured, stopped: {rr.stopped_by}, {_rate(rr)}")
            print(f"  worker      {r.label} {r.info.name}: {what}")
            if rr is not None and rr.cut_off is not None and r is not best:  # trial 35: said of the best's alone
                print(f"              {_cut_off(rr)}")
    unsaved = [r.error for r in results if r.report is not None and r.report.profile_error]
    for error in unsaved:  # after the summaries, as a run on one device ends (ProfileNotSaved)
        _say(f"autotune: error: {error}")
    signums = [r.signum for r in results if r.signum is not None]
    if signums:  # as a run on one device ends (trial 33: nothing said, where workers were starting)
        _say("autotune: interrupted; the studies keep every finished trial: run the same command again to resume")
        return _STOPPED_BY + max(signums)  # SIGTERM (15) over SIGINT (2): it was passed on to all
    if unsaved:
        return _EXIT_ERROR
    # a worker killed (the OOM killer, say) or failed: the others' best is saved, but a batch
    # job must see it (trial 74: exit 0)
    lost = [r for r in results if r.report is None and r.error is not None]
    saved = any(r.report is not None and r.report.profile_path is not None for r in results)
    for r in lost:  # trial 76: "the others' results are saved" where none were, or --no-save
        _say(f"autotune: error: worker {r.label} ({r.info.name}) {r.error}"
             + ("; the other workers' best is saved" if saved else ""))
    if lost:
        return _EXIT_ERROR
    if any(r.report is not None and r.report.best is not None for r in results):
        return 0
    _say("autotune: error: no worker found a verified configuration; the summaries above say why")
    return _EXIT_ERROR


def _command_options(parser: argparse.ArgumentParser) -> set[str]:
    """Every option string some command takes."""
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return {option for sub in commands.choices.values() for option in sub._option_string_actions}


def _apart(a: float, b: float) -> tuple[str, str]:
    """``a`` and ``b`` with 4 decimals, or as many more as tell them apart (trial 106: "0.0210
    ms as the study had it, took 0.0210 ms timed again").

    >>> _apart(0.02101, 0.02104), _apart(1.5, 2.0)
    (('0.02101', '0.02104'), ('1.5000', '2.0000'))
    """
    digits = 4
    while f"{a:.{digits}f}" == f"{b:.{digits}f}" and digits < 9:
        digits += 1
    return f"{a:.{digits}f}", f"{b:.{digits}f}"


def _rate(report: Any) -> str:
    return f"{60 * report.measured / report.wall_s:.1f} trials/min" if report.wall_s > 0 else "no time"


def _fmt_params(params: Any, spec: Any = None, problem: Any = None) -> str:
    """``params`` as ``WPT=4 WG=64``; given the spec, without those the configuration ignores
    (a parameter whose ``when`` does not hold: it keeps its first value, which means nothing)."""
    from .spec import config_label  # here: importing spec at the top would slow every --help

    return config_label(params if spec is None else spec.active(params, problem or {}))


def _fmt_config(params: Any, flags: Any, spec: Any = None, problem: Any = None) -> str:
    """A configuration as the summary, ``show`` and ``bench`` give it: ``WPT=4 WG=64  flags:
    -cl-mad-enable`` (``params`` less the flag switches, and the flags they enable)."""
    return _fmt_params(params, spec, problem) + (f"  flags: {' '.join(flags)}" if flags else "")


def _fmt_full(params: Any, spec: Any, problem: Any) -> str:
    """:func:`_fmt_config` of a whole configuration, its flag switches among ``params``."""
    return _fmt_config(spec.without_flags(params), spec.enabled_flags(params), spec, problem)


def _fmt_beside(params: Any, best: Any, spec: Any, problem: Any) -> str:
    """:func:`_fmt_full` of a configuration named beside the best: one that differs from it
    only in flags says it has none (trial 63: "best ... flags: -cl-fast-relaxed-math" and an
    "overturned" line read as one configuration both winning and losing)."""
    return _fmt_full(params, spec, problem) + ("  flags: none" if _bare_beside(params, best, spec) else "")


def _bare_beside(params: Any, other: Any, spec: Any) -> bool:
    """``params`` enables no flag and differs from ``other``, which enables some, in them alone."""
    return (not spec.enabled_flags(params) and bool(spec.enabled_flags(other))
            and spec.without_flags(params) == spec.without_flags(other))


def _progress(spec: Any, label: str = "") -> Any:
    """The progress printer; ``label`` names the worker when several print."""
    who = f"{label} " if label else ""
    shared = bool(label)  # the study's count is shown once it differs, then on every line

    def show(event: str, rec: Any, state: Any) -> None:
        nonlocal shared
        if event == "start":
            full = state.study_budget is not None and state.study_measured >= state.study_budget
            on = f" on {state.device}" if state.device else ""  # a fresh user waited blind for it (trial 32)
            print(f"{who}tuning {spec.name}{on}: up to {state.budget} new configuration{'s' * (state.budget != 1)}"
                  + (f" (the study holds {state.study_measured})" if state.study_measured else "")
                  + ("; none: that is its --study-trials budget" if full else ""), flush=True)
            if state.other_versions:
                print(f"{who}a new study: the spec's template, reference or space has changed since its "
                      f"{state.other_versions} trials at this size on this device, which are kept apart "
                      "(reverting the edit resumes them)", flush=True)
            if state.warm_from:
                print(f"{who}no tuned {spec.name} on this device yet: starting from the winners on "
                      f"{', '.join(state.warm_from)}", flush=True)
            if state.retrying:
                are = "is" if state.retrying == 1 else "are"
                print(f"{who}{_count(state.retrying, 'configuration')} that timed out under a shorter "
                      f"--max-time-per-config, or whose worker was killed from outside, {are} measured again first",
                      flush=True)
            return
        if event == "confirm":
            from .tuner import CONFIRM_ROUNDS
            print(f"{who}timing the {state.confirming} fastest again, in {CONFIRM_ROUNDS} interleaved rounds",
                  flush=True)
            return
        n = f"{who}[{state.measured:>3}/{state.budget}]"
        shared = shared or state.study_measured != state.measured or state.study_budget is not None
        if shared:
            n += f" study {state.study_number or state.study_measured:>3}" + \
                (f"/{state.study_budget}" if state.study_budget else "")
        if rec.ok:
            best = state.best.median_ms if state.best else math.inf
            star = "*" if state.best is rec else " "
            once = "  (pruned)" if rec.pruned else ""
            print(f"{n} {rec.median_ms:10.4f} ms {star} best {best:.4f} ms  "
                  f"{_fmt_params(rec.params, spec, state.problem)}{once}", flush=True)
        else:
            print(f"{n} {rec.status.value:>13}  {_fmt_params(rec.params, spec, state.problem)}  "
                  f"({_clip(rec.message, 120)})", flush=True)
    return show


def _clip(message: str, width: int) -> str:
    """The message's first line, cut to ``width`` characters with a mark where it was cut (a
    line cut silently mid-sentence lost the fix it ended with)."""
    line = message.splitlines()[0] if message else ""
    return clipped(line, width, cut="\n" in message.strip())


def _verdict(report: Any) -> str:
    """What saving did; where the profile kept its entry, which one (the best above is not it)."""
    kept = report.profile_kept
    if kept is None:
        return str(report.profile_verdict)
    spec, best = report.spec, report.best
    config = _fmt_config(kept.params, kept.build_flags, spec, report.problem)
    # as the profile stores it (6 decimals): trial 64 had 0.0777 ms called faster than 0.0777 ms
    mine = round(best.median_ms, 6) if best is not None else math.inf
    if kept.time_ms > mine:  # trial 61: said to be "as fast" as this run's best
        return (f"{report.profile_verdict}: its entry of {kept.time_ms:.4f} ms, which a finished run of this study "
                f"saved, stays ({config}); this stopped run's faster best was timed once, and the next finished run "
                "times both")
    as_fast = kept.time_ms >= mine
    same = best is not None and config == _fmt_config(spec.without_flags(best.params), spec.enabled_flags(best.params),
                                                      spec, report.problem)
    # the same configuration, timed before (trial 28: "faster than this run's best" read as another one)
    than = ("is this run's best configuration, at the same time," if same and kept.time_ms == mine else
            f"is this run's best configuration, timed {'as fast' if as_fast else 'faster'} before," if same else
            f"is {'as fast as' if as_fast else 'faster than'} this run's best")
    return (f"{report.profile_verdict}: its entry of {kept.time_ms:.4f} ms tuned {kept.tuned_at or 'earlier'} "
            f"{than} and stays ({config})")


def _baseline_untimed(report: Any) -> str:
    """What the ``confirmed`` line adds where the baseline was to be timed in the rounds and the
    run's time was up first (trial 35: the speed-up silently came from its cold first timing)."""
    from .tuner import BASELINE_RETIME_MS

    base = report.baseline
    if base is None or not base.ok or report.baseline_timed or base.median_ms > BASELINE_RETIME_MS \
            or (report.best is not None and base.params == report.best.params):
        return ""
    return "; the baseline was not timed again (the time was up), so the speed-up is from its first timing"


def _describe_error(m: Any) -> str:
    """The ``error`` line: no share of a tolerance where none was used (integer outputs, exact)."""
    if m.tolerance_used is None:
        return "0: every element as the reference's" if m.error == 0 else \
            f"{m.error:.3g} relative to the reference (norm)"
    return (f"{m.error:.3g} relative to the reference (norm), worst element at {100 * m.tolerance_used:.0f}% "
            "of its tolerance")


def _no_best(report: Any) -> str:
    """Why a run has no verified configuration, in a few words."""
    return ("nothing was measured before the run stopped" if not report.study_trials else
            "no configuration passed verification" if "wrong_result" in report.failures
            or report.unsteady or not report.failures else
            "no configuration ran to a result to verify (failures below)")


def format_report(report: Any, *, worker: str | None = None) -> str:
    """The end-of-run summary (``worker``: the label of the worker whose report it is, where
    several tuned together)."""
    from .tuner import TuneReport

    if not isinstance(report, TuneReport):  # trial 75: None gave "'NoneType' object has no attribute 'spec'"
        raise TypeError(f"format_report takes the TuneReport tune() returns (a TuningInterrupted carries one as "
                        f".args[0]), not {type(report).__name__}")
    lines = [f"{report.spec.name} on {report.device.name} ({report.device.platform}), "
             f"problem {', '.join(f'{k}={v}' for k, v in report.problem.items())}"]
    best = report.best
    if best is None:  # the reason it stopped (the last line) says why nothing was measured
        lines.append(_no_best(report))
    else:
        named = [m.params for m in (report.runner_up, report.overturned and report.overturned[1]) if m]
        # trial 64: "best ... UNROLL=8" above "overturned ... (... UNROLL=8  flags: ...)"
        lines.append(f"  best        {_fmt_full(best.params, report.spec, report.problem)}"
                     + ("  flags: none" if any(_bare_beside(best.params, p, report.spec) for p in named) else ""))
        lo, hi = best.spread
        lines.append(f"  time        {best.median_ms:.4f} ms median (min {lo:.4f}, max {hi:.4f})")
        if report.confirmed and report.runner_up is not None:
            ru = report.runner_up
            beside = {"beside": " with the baseline",
                      "among": ", the baseline among them"}.get(report.baseline_timed, "")
            # trial 62: the runner-up was the baseline, which only its matching time gave away
            which = "the baseline" if report.baseline is not None and ru.params == report.baseline.params else \
                _fmt_beside(ru.params, best.params, report.spec, report.problem)
            lines.append(f"  confirmed   the {report.confirmed} fastest timed again{beside}, interleaved; runner-up "
                         f"{ru.median_ms:.4f} ms (min {ru.spread[0]:.4f}, max {ru.spread[1]:.4f}; {which})"
                         + ("; their spreads overlap, so another run may rank them the other way"
                            if report.close_call else "") + _baseline_untimed(report))
            if report.overturned is not None:  # trial 32: the progress lines' best was not what was saved
                first, again = report.overturned
                # "as the study had it": an earlier run's rounds' median, or the search's one timing (trial 74)
                was, now = _apart(first, again.median_ms)
                lines.append(f"  overturned  the search's fastest, {was} ms as the study had it "
                             f"({_fmt_beside(again.params, best.params, report.spec, report.problem)}), took "
                             f"{now} ms timed again (min {again.spread[0]:.4f}, max "
                             f"{again.spread[1]:.4f}): the best above is the fastest over all rounds")
        elif report.unconfirmed and not report.unsteady and report.retime_limit is not None:  # trial 63
            lines.append("  confirmed   no: the fastest ran past the limit per configuration "
                         f"({report.retime_limit:g} s) when timed again, so their search timings decided (an "
                         "earlier run's rounds', where it timed them) and gave the speed-up; a larger "
                         "--max-time-per-config lets them be timed again")
        elif report.unconfirmed and not report.unsteady and report.stopped_by == "interrupted":  # (trial 125)
            lines.append("  confirmed   no: the run was stopped (Ctrl-C or a signal) before the fastest were timed "
                         "again, so their search timings decided (an earlier run's rounds', where it timed them) and "
                         "gave the speed-up")
        elif report.unconfirmed and not report.unsteady:  # trial 35: said only where this run measured 2+
            lines.append("  confirmed   no: the run's time was up before the fastest could be timed again, so their "
                         "search timings decided (an earlier run's rounds', where it timed them) and gave the "
                         "speed-up; a longer --timeout or --study-timeout leaves a tenth for it")
        lines.append("  throughput  " + ", ".join(f"{v:.2f} {k}" for k, v in report.throughput().items()))
        if best.error is not None:
            lines.append(f"  error       {_describe_error(best)}")
    if report.unsteady:
        racy = report.unsteady[0]
        more = f" (and {_count(len(report.unsteady) - 1, 'other')})" if len(report.unsteady) > 1 else ""
        lines.append(f"  unsteady    {_fmt_full(racy.params, report.spec, report.problem)}{more} passed "
                     "verification in the search and failed when checked again, so it was left out (a race "
                     "between work-items gives a wrong result now and then, and the check again also puts NaN "
                     f"past the ends of outputs and scratch buffers): {_clip(racy.message, 700)}")
    if report.baseline is not None:
        if report.baseline.ok:
            sp = report.speedup
            overrides = report.spec.baseline_overrides()
            rest = "; the others at their first values" if len(overrides) < len(report.spec.parameters) else ""
            shown = f" ({_fmt_params(overrides)}{rest})" if overrides else " (every parameter at its first value)"
            lines.append(f"  baseline    {report.baseline.median_ms:.4f} ms{shown}"
                         + (f"  -> speed-up {sp:.2f}x" if sp else ""))
        else:
            lines.append(f"  baseline    {report.baseline.status.value}: {report.baseline.message}")
    failed = sum(report.failures.values())
    # proposals, not trials: a proposal another worker held is skipped, and may be proposed again
    # trial 33: after a crash they are that run's claims, not another worker's, until they expire
    elsewhere = (f", {_count(report.elsewhere, 'proposal')} skipped as claimed by another worker (or by a run "
                 "that ended without giving them back, until the claims expire)"
                 if report.elsewhere else "")
    by = f"by worker {worker}" if worker else "this run"
    if report.warm_from:
        lines.append(f"  started     from the winners on {', '.join(report.warm_from)} (no tuned entry on this "
                     "device; --no-warm-start starts without them)")
    lines.append(f"  trials      {report.measured} measured {by} ({report.measured - failed} ok, {failed} failed), "
                 f"{report.skipped_invalid} invalid skipped unbuilt, "
                 f"{_count(report.repeats, 'repeat')} reused{elsewhere}; "
                 f"study total {report.study_trials}; valid space {_valid_space(report)} of {report.full_space:,}"
                 + _copies(report))
    lines += _ruled_out(report)
    if report.pruned:
        lines.append(f"    {report.pruned:>4} pruned: two timed launches took over --prune times the best so far")
    for status, count in sorted(report.failures.items()):
        lines.append(f"    {count:>4} {status:<13} e.g. {_clip(report.failure_examples.get(status, ''), 400)}")
    for name, value, faults in report.unverified:  # trial 56: it read as a variant that lost
        how = ", ".join(f"{n} {status}" for status, n in sorted(faults.items()))
        lines.append(f"              no configuration with {name} = {value} ran correctly ({how}): the best is "
                     f"among the other {name} values; fix the failure and run again to compare")
    from .diagnose import WRONG_WINDOW
    from .verify import too_tight

    stop = {"trials": "trial budget reached", "timeout": "--timeout reached", "exhausted":
            "every valid configuration measured", "interrupted": "interrupted",
            "study trials": "the study's trial budget reached", "study timeout": "the study's --study-timeout "
            "passed (counted from the study's first worker)",
            "same wrong result": f"the first {WRONG_WINDOW} configurations that ran to a result, the baseline "
            "first, all gave the same wrong result"}
    lines.append(f"  stopped     after {report.wall_s:.1f} s ({_rate(report)}): "
                 f"{stop.get(report.stopped_by, report.stopped_by)}")
    if report.stopped_by.endswith("timeout") and report.cut_off is not None:
        lines.append(f"              {_cut_off(report)}")
    if report.walked_out:  # trial 87: "0 measured" runs, again and again, with no word why
        lines.append("              the time went on looking for an unmeasured valid configuration: the constraints "
                     "leave few, scattered ones (each is checked once every parameter it names is chosen, so a walk "
                     "passes over most of the space); relax them, or narrow the parameters' values")
    if report.claimed:  # trial 28: a killed run's claims stopped the next under budget, unsaid
        lines.append(f"              {report.claimed} of them claimed, not stored yet: being measured by another "
                     f"worker, or left by a run that ended mid-trial (a claim lapses {report.claim_s:.0f} s after "
                     "it was taken, or at once where that run's process on this host is gone; the next run "
                     "measures it)")
    if report.stopped_by == "same wrong result" and too_tight(report.failure_examples.get("wrong_result", "")):
        lines.append("              each off by rounding alone: the spec's tolerance is at fault, not the kernel "
                     "(see the wrong_result line); widen it and run again")
    elif report.stopped_by == "same wrong result":
        # a study in memory starts anew each run, and stops the same way (trial 70)
        on = ("run again without --storage :memory:, and once more to search on from that run's trials"
              if report.storage == ":memory:" else "run the same command again to search on")
        lines.append("              so the reference or the spec's args and outputs are likelier at fault than the "
                     f"kernel: check them; if the kernel is, fix it, or {on}")
        if "which must be exact; rtol=0, atol=0" in report.failure_examples.get("wrong_result", ""):  # trial 56
            lines.append("              or the tolerance: rtol and atol 0 ask each element to match exactly, which "
                         "floats computed in another order rarely do (a copy or permutation does); widen it if so")
        if "(unwritten or overflow)" in report.failure_examples.get("wrong_result", ""):
            # trial 52: a Kernel Tuner user's grid as global sizes left most elements unwritten
            lines.append("              elements left unwritten may also mean a launch too small: `global:` counts "
                         "work-items (a CUDA grid times its block; Kernel Tuner's problem_size), not work-groups")
    if report.profile_path is not None:
        # trial 57: "(added)" for an entry saved as partial
        partial = "partial; " if report.partial and not str(report.profile_verdict).startswith(("kept", "left")) else ""
        lines.append(f"  profile     {report.profile_path} ({partial}{_verdict(report)})")
    elif best is not None:  # a verified best goes to the profile unless saving was off
        why = "see the error below" if report.profile_error else report.profile_verdict
        lines.append(f"  profile     not saved: {why or '--no-save (TuneOptions(save=False))'}")
    if report.study_trials:  # trial 35: offered for a study with no trial, it wrote an empty page
        # the report's own storage: tune()'s caller's summary named the default study (trial 70)
        lines += [f"  report      {command}" for command in [_report_command(report, report.storage)] if command]
    return "\n".join(lines)


def _cut_off(report: Any) -> str:
    """What becomes of the configuration a deadline stopped, and the --timeout that lets the next
    run finish it: its limit per configuration beside a few seconds of start-up and the share of
    --timeout kept for timing the leaders again (a tenth, at most 15 s)."""
    cut = report.cut_off
    limit, earlier = cut.limit_s, cut.earlier_limit_s
    need = limit + 5
    enough = math.ceil(need / 0.9) if need / 0.9 < 150 else math.ceil(need + 15)
    what = _fmt_params(cut.params, report.spec, report.problem)
    # trial 89: "at least 320 s" for a configuration that needed a few: the limit is a bound
    ran = f" (it had run {cut.ran_s:.1f} s when the time was up; one that ends sooner needs less)"
    if earlier is not None:  # a timeout measured again: only a longer limit measures it again
        return (f"{what} was being measured again (it timed out under {earlier:.3g} s before): a later run whose "
                f"limit per configuration is over {earlier:.3g} s measures it first; give that run a --timeout of at "
                f"least {enough} s for a limit of {limit:.3g} s")
    if report.stopped_by == "study timeout":  # a longer --timeout would not have helped (trial 28)
        return (f"{what} was being measured: a later run of the study measures it first, once its --study-timeout "
                "(counted from the study's first worker) leaves it time for its limit per configuration "
                f"({limit:.3g} s in this run)")
    if report.storage == ":memory:":  # no next run of it (trial 87: one was promised)
        return (f"{what} was being measured when the run's time was up; the study was in memory, so a run that "
                f"should measure it needs a --timeout of at least {enough} s for a limit of {limit:.3g} s{ran}")
    return (f"{what} was being measured: the next run of the study measures it first, for up to its limit per "
            f"configuration ({limit:.3g} s in this run), so give that run a --timeout of at least {enough} s "
            f"for that limit{ran}")


def _report_command(report: Any, storage: str | None) -> str | None:
    """The `autotune report` command that shows this run's study (None for a study kept in memory)."""
    from shlex import quote

    from .spec import problem_label
    from .study import shown_url

    if storage == ":memory:":
        return None
    from .settings import default_storage
    from .study import sqlite_path

    url = storage or default_storage()
    if url.startswith("sqlite:") and not (database := sqlite_path(url)).exists():
        # trial 106: AUTOTUNE_HOME removed mid-run, and the command named a study that was gone
        return (f"none: the study database {database.absolute()} was removed during the run, and its trials with it "
                "(the profile keeps the best; a new run starts a new study)")
    spec = report.spec
    command = " ".join(["autotune report", quote(spec.name if spec.builtin else str(spec.path)),
                        "-s", quote(problem_label(report.problem)), "-d", quote(report.device.slug),
                        *(["--storage", quote(shown_url(_absolute(storage)))] if storage else [])])
    # the quick start installs no plotting library: say so here rather than when it is run
    # trial 77: a shared, non-editable install has no checkout; matplotlib is what it needs
    needs = "" if importlib.util.find_spec("matplotlib") else \
        '  (after pip install -e ".[report]" from the checkout, or matplotlib into this environment)'
    return command + needs


def _absolute(storage: str) -> str:
    """A SQLite URL with its path made absolute, so that the command works from any folder
    (trial 28: ``sqlite:///rel.db`` was echoed as given)."""
    from .settings import sqlite_url
    from .study import sqlite_path

    prefix = "sqlite:///"
    path = storage[len(prefix):] if storage.startswith(prefix) else ""
    if not path or path.startswith("/") or path.startswith(":memory:"):
        return storage
    # the folder's name escaped, as the URL's own part is (trial 43: a folder named `w d%?` or
    # `p%41` made the printed command read another database, or none)
    query = storage.partition("?")[1:]
    return sqlite_url(sqlite_path(storage)) + "".join(query)


def _ruled_out(report: Any) -> list[str]:
    """Why the problem rules out so much of the space, and the values it rules out entirely
    (trial 89: "valid space 6 of 800", and a variant never tuned, without a word why)."""
    # the whole first (trial 126: at M=N=K=1 the two commonest, 35% and 26%, read as all there was)
    lines = [f"              about {report.invalid_drawn:.0%} of combinations drawn at random are invalid here, "
             "each counted by the first check it fails:"] if report.ruled_out else []
    lines += [f"              about {share:.0%} of the space is ruled out here by: {_clip(why, 200)}"
              for why, share in report.ruled_out]
    if any("not divisible by local" in why for why, _ in report.ruled_out):  # trial 113: the fix unsaid
        lines.append("              (where a size is no multiple of the work-group, round the global size up to one, "
                     "e.g. global: [\"ceil(N / WG) * WG\"], and have the kernel skip the work-items past the end)")
    for certain, what in ((True, "valid in no configuration here"),
                          (False, "no valid configuration found (the count is an estimate) with")):
        if said := _values_and_reasons([n for n in report.never_valid if n.certain is certain]):
            lines.append(f"              {what}: {said}")
    return lines


def _values_and_reasons(never: list[Any]) -> str:
    """``never`` (ruledout.NeverValid) as the summary says them: grouped by reason, those whose
    reason was not looked for last (trial 123: they read as the previous group's)."""
    from .ruledout import REASONS_MOST, REASONS_S

    by_why: dict[str | None, list[str]] = {}
    for n in never:
        if n.looked:
            by_why.setdefault(n.why, []).append(f"{n.name}={n.value}")
    unlooked = [f"{n.name}={n.value}" for n in never if not n.looked]
    said = [_some_values(values) + (f" (mostly: {_clip(why, 160)})" if why else "") for why, values in by_why.items()]
    if unlooked:  # (trial 124: a clip of the whole line cut this label off, the values left unexplained)
        said.append(_some_values(unlooked) + f" (not looked into: a reason is sought for at most {REASONS_MOST} "
                    f"values, in {REASONS_S:g} s)")
    return "; ".join(said)


def _some_values(values: list[str], most: int = 8) -> str:
    """The first ``most`` of ``values``, and how many more."""
    return ", ".join(values[:most]) + (f" and {len(values) - most} more" if len(values) > most else "")


def _copies(report: Any) -> str:
    """What the whole counts where a parameter has a ``when`` (trial 98: "96 of 128" read as 32
    ruled out, where they were copies differing only in a parameter their variant ignores)."""
    if not any(p.when is not None for p in report.spec.parameters):
        return ""
    return " combinations (those that differ only in a parameter their variant ignores are one configuration)"


def _valid_space(report: Any) -> str:
    """The count, or the estimate to the figures its standard error allows, with that error
    (trial 123: `~31176`, where estimates with other seeds went from 6,262 to 32,000).

    >>> from types import SimpleNamespace as S
    >>> _valid_space(S(valid_space=31176, valid_space_exact=False, valid_space_error=0.38))
    '~31,000 (estimated, ±38%)'
    >>> _valid_space(S(valid_space=823674, valid_space_exact=False, valid_space_error=0.03))
    '~824,000 (estimated, ±3%)'
    >>> _valid_space(S(valid_space=4, valid_space_exact=False, valid_space_error=0.12))
    '~4 (estimated, ±12%)'
    """
    n, error = report.valid_space, report.valid_space_error
    if report.valid_space_exact:
        return f"{n:,}"
    if error is None:  # none found valid: no spread to give
        return f"~{n:,} (estimated)"
    figures = 3 if error < 0.05 else 2
    return f"~{round(n, min(figures - len(str(n)), 0)):,} (estimated, ±{error:.0%})"


_JSON_HELP = "print JSON (for scripts) instead of the table"


def _print_json(value: Any) -> None:
    """``value`` as strict JSON: a number that is not finite (a hand-edited time, say) is null."""
    print(json.dumps(_strict(value), indent=2, default=str, allow_nan=False))


def _strict(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, Mapping):
        return {k: _strict(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_strict(v) for v in value]
    return value


def _cmd_list(args: argparse.Namespace) -> int:
    from . import spec as specs

    loaded = [specs.load(name) for name in specs.builtin_names()]
    if args.json:
        _print_json([{"name": sp.name, "description": sp.description, "spec": str(sp.path),
                      "problem": sp.default_problem(),
                      "parameters": {p.name: list(p.values) for p in sp.parameters}} for sp in loaded])
        return 0
    for sp in loaded:
        print(f"{sp.name:<12} {sp.description}")
    return 0


def _cmd_devices(args: argparse.Namespace) -> int:
    from . import device, runtimes

    found = device.list_devices()
    if not found:
        raise AutotuneError(f"no OpenCL device found; {runtimes.cpu_fix()}")
    built = device.build_checks(found, recheck=args.recheck)
    default, trouble = _default_devices() if any(b.ok for b in built.values()) else (None, None)
    if args.json:
        _print_json([{**asdict(d), "slug": d.slug, "builds": built[d.selector].ok,
                      "why_not": None if built[d.selector].ok else built[d.selector].message,
                      "default": d.selector in (default or ())} for d, _ in found])
    else:
        _print_devices(found, built, default or set())
    if default is None:
        raise AutotuneError("no device can run OpenCL kernels" + device.fix_for([b.message for b in built.values()]))
    if trouble is not None:  # after the table, which is what it asks the user to look at
        raise trouble
    return 0


def _print_devices(found: Sequence[Any], built: Mapping[str, Any], default: set[str]) -> None:
    print(f"{'selector':<9} {'type':<5} {'device':<36} {'platform':<30} {'CUs':>4} {'max WG':>6} "
          f"{'local':>9}  builds")
    for d, _ in found:
        check = built[d.selector]
        mark = "yes" + (" (default)" if d.selector in default else "") if check.ok else f"NO: {check.message}"
        print(f"{d.selector:<9} {d.device_type:<5} {d.name[:36]:<36} {d.platform[:30]:<30} "
              f"{d.compute_units:>4} {d.max_work_group_size:>6} {d.local_mem_size // 1024:>5} KiB  {mark}")
    print("\nuse --device with a selector (e.g. 0:0) or a name substring (e.g. nvidia, intel); profile: <slug>.yaml")
    for d, _ in found:
        print(f"  {d.selector}: {d.slug}")


def _default_devices() -> tuple[set[str], AutotuneError | None]:
    """The selectors of the devices `run` uses by default ($AUTOTUNE_DEVICE may name several),
    or none and why $AUTOTUNE_DEVICE names none."""
    from . import device, settings

    chosen = settings.default_device_selector()
    try:
        if chosen and device.several(chosen):
            return {d.selector for d in device.select_many(chosen, "$AUTOTUNE_DEVICE")}, None
        return {device.select(None)[0].selector}, None
    except AutotuneError as exc:
        return set(), exc


def _cmd_show(args: argparse.Namespace) -> int:
    from . import device, profiles, settings
    from . import spec as specs

    wanted, own = args.kernel, None
    if wanted is not None and not wanted.strip():  # trial 71: `show ''` showed every kernel
        raise OptionError("KERNEL is empty; give a kernel name or spec path, or leave it out for every kernel")
    if wanted and (wanted.endswith((".yaml", ".yml")) or "/" in wanted):
        own = specs.load(wanted)
        wanted = own.name  # profiles hold the spec's name, not its path
    builtin = set(specs.builtin_names())
    folders = profiles.search_folders(settings.profiles_dir(), own.path if own is not None else None)
    target = _show_target(args.device, folders)

    def current(kernel: str) -> Any:
        """The spec entries of ``kernel`` are checked against: the one given, or a built-in;
        None: each entry is checked against the spec file it records (:func:`_recorded`)."""
        if own is not None:
            return own
        return specs.load(kernel) if kernel in builtin else None

    mine = target.info.profile_header() if target.info is not None else None
    shown, listed = 0, []
    for folder in folders:
        path = profiles.path_for(target.slug, folder)
        try:
            doc = profiles.read(path, check_entries=False)  # a malformed entry is listed, not fatal
        except ProfileError as exc:
            if folder == settings.profiles_dir():  # the user's own: theirs to fix, and runs refuse it
                raise
            # another's (a site's, trial 79): said, and the other folders still shown
            _warn(f"{exc} (load_kernel skips it; its owner can fix it)")
            continue
        for kernel in sorted(doc.get("kernels") or {}):
            if wanted and kernel != wanted:
                continue
            broken: list[ProfileError] = []
            entries = profiles.entries(doc, kernel, str(path), broken.append)
            if not entries and not broken:  # `mul1:` left with nothing under it (trial 101: an empty table)
                continue
            spec = current(kernel)
            block = _ShowBlock(kernel, path, entries, tuple(broken), spec,
                               profiles.written_for_another(doc.get("device"), mine) if mine is not None else None,
                               folder == settings.profiles_dir(),  # runs write here only
                               target.info.facts() if target.info is not None else None,
                               _recorded(kernel, entries, spec))
            if not args.json:
                _print_block(block, target.title if not shown else None, mine)
            listed.append(block)
            shown += len(block.entries) + len(broken)
    if not shown and args.kernel:
        specs.resolve(args.kernel)  # neither tuned here nor a kernel: an error, as for run
    if args.json:
        _print_json({"device": target.title, "slug": target.slug, "present": target.info is not None,
                     "profiles": [b.to_json(mine) for b in listed]})
    if shown or args.json:
        return 0
    if target.info is None:
        print(f"no tuned entries for {args.kernel or 'any kernel'} on {target.title}")
    else:
        info = target.info
        what = f"{args.kernel} on " if args.kernel else ""
        # a selector run takes (trial 97: `-d NAME.yaml`, which run refuses, was given back)
        on = f" -d {shlex.quote(info.selector if profiles.slug_named(args.device) != args.device else args.device)}" \
            if args.device else ""
        check = device.build_checks([(info, target.dev)])[info.selector]
        kernel = shlex.quote(args.kernel) if args.kernel else "KERNEL"
        advice = (f"; run `autotune run {kernel}{on}` first (a run saves an entry once a "
                  "configuration verifies)") if check.ok else \
            f", and it cannot be tuned here, since it cannot run OpenCL kernels: {check.message}"
        print(f"no tuned entries for {what}{info.name}{advice}")
    print(_looked_in(folders, target.slug))
    return 0


def _readable(path: Path) -> bool:
    """Whether the profile at ``path`` reads (a corrupt one was warned of, not "found": trial 97)."""
    from . import profiles

    try:
        profiles.read(path, check_entries=False)
    except ProfileError:
        return False
    return True


def _looked_in(folders: Sequence[Path], slug: str) -> str:
    """Where ``show`` looked, and the other devices' profiles there (trial 72: a mistyped
    AUTOTUNE_HOME, or one set to its profiles/ folder, said only "no tuned entries")."""

    # each with its folder where there are several (trial 98: "there", after the folder it was
    # found in, named profiles of another)
    # in the order they are searched, so the user's own come before autotune's shipped ones
    several = len(folders) > 1
    others = list(dict.fromkeys(str(p) if several else p.name for folder in folders if folder.is_dir()
                                for p in sorted(folder.glob("*.yaml")) if p.stem != slug))
    present = [str(f) for f in folders if (f / f"{slug}.yaml").is_file() and _readable(f / f"{slug}.yaml")]
    said = f"  looked for {slug}.yaml in {', '.join(str(f) for f in folders)}"
    # trial 95: a profile there with no entries read as though there were none
    said += f"; found in {', '.join(present)}, with no entries for it" if present else ""
    said += f"; other devices' profiles {'in those folders' if several else 'there'}: {', '.join(others)}" \
        if others else ""
    home = settings.home()
    if home.name == "profiles" and any(home.glob("*.yaml")):
        said += f"; AUTOTUNE_HOME ({home}) is a profiles folder itself: set it to the folder above it"
    return said


@dataclass(frozen=True)
class _ShowBlock:
    """One kernel's entries in one profile file, as ``show`` lists them."""

    kernel: str
    path: Any
    entries: list[Any]
    broken: tuple[ProfileError, ...]
    spec: Any  # what the entries are checked against; None: each its recorded spec file's
    other: str | None  # the device the file was written for, where not this one
    ours: bool  # the profile runs write to
    facts: Mapping[str, Any] | None = None  # the device's, where it is present: entries are checked against them
    recorded: Mapping[str, Any] = field(default_factory=dict)  # spec file -> its spec, or why it does not load

    def spec_of(self, e: Any) -> Any:
        """The spec ``e`` is checked against; None: not known here."""
        if self.spec is not None:
            return self.spec
        found = self.recorded.get(e.spec_file or "")
        return None if isinstance(found, str) else found

    def why_skipped(self, e: Any) -> str | None:
        """Why load_kernel (with the spec shown) does not use ``e``, or None (:func:`_skipped`)."""
        why = _skipped(self.spec_of(e), e, self.facts)
        if why is not None and (other := self.namesake(e)) is not None:
            return f"{'picked' if e.picked else 'tuned'} with {other}, another spec of this kernel's name"
        return why

    def use_of(self, e: Any) -> str:
        """What load_kernel does with ``e``, which it does not use as it is: a stale entry's
        configuration is timed again at first use (trial 89: said to be skipped)."""
        spec = self.spec_of(e)
        return spec.first_use_of(e) if spec is not None and self.namesake(e) is None else "load_kernel skips it"

    def remedy(self, e: Any, why: str) -> str:
        """What makes ``e`` usable: for a namesake's entry, not a run of the spec shown, which is
        refused while that file is there (trial 56), but that spec's own look."""
        other = self.namesake(e)
        return f"`autotune show {shlex.quote(other)}` checks it against that spec" if other is not None \
            else _remedy(why, self.ours)

    def namesake(self, e: Any) -> str | None:
        """The other spec file of the kernel's name, still there, that tuned ``e``, where a spec
        is shown (None: none)."""
        return e.spec_file if self.spec is not None and e.spec_file in self.recorded else None

    @property
    def checked(self) -> bool:
        return any(self.spec_of(e) is not None for e in self.entries) or (self.spec is not None)

    def to_json(self, mine: Mapping[str, Any] | None) -> dict[str, Any]:
        from .profiles import written_for_another

        def entry(e: Any) -> dict[str, Any]:
            why = self.why_skipped(e)
            return {**e.to_yaml(), "usable": None if self.spec_of(e) is None else why is None,
                    "skipped_because": why, "measured_on_another_device": written_for_another(e.device, mine)
                    if mine is not None and self.other is None else None}

        return {"kernel": self.kernel, "path": str(self.path), "written_for_another_device": self.other,
                "checked": self.checked, "entries": [entry(e) for e in self.entries],
                "malformed": [str(exc) for exc in self.broken]}


def _recorded(kernel: str, entries: list[Any], shown: Any = None) -> dict[str, Any]:
    """The spec files ``entries`` record that still load as ``kernel``, other than the ``shown``
    spec's (trial 50: show asked for the path they name; trials 51, 56: each entry is checked
    against its own, namesakes' apart), or why one that is there does not."""
    from pathlib import Path

    from . import spec as specs

    found: dict[str, Any] = {}
    own = shown.file_id if shown is not None else None
    for file in dict.fromkeys(e.spec_file for e in entries
                              if e.spec_file and e.spec_file != own and Path(e.spec_file).is_file()):
        try:
            spec = specs.load(file)
        except AutotuneError as exc:  # broken since: its entries go unchecked, and show says why (trial 53)
            found[file] = str(exc)
            continue
        if spec.name == kernel:
            found[file] = spec
    return found


def _print_block(block: _ShowBlock, title: str | None, mine: Mapping[str, Any] | None) -> None:
    """``block`` as show's table, under the device's ``title`` where this is the first."""
    from .profiles import NotAnEntry

    if title is not None:
        print(title)
    broken = next((f"  (its entries' spec file does not load: {why}; fix it, or give the path of the spec to "
                   "check them against)" for why in block.recorded.values() if isinstance(why, str)), "")
    unchecked = "" if block.checked else \
        broken or "  (not a built-in kernel: give its spec's path to mark stale entries)"
    elsewhere = f"  (written for {block.other}: load_kernel uses it here, with a warning)" if block.other else ""
    _show_entries(f"{block.kernel}  [{block.path}]{elsewhere}{unchecked}", block, None if block.other else mine)
    for exc in block.broken:
        # no entry at all (`- 5`): its message says the fix, and no run replaces it
        remedy = "" if isinstance(exc, NotAnEntry) else f"; {_remedy(str(exc), block.ours)}"
        print(f"  {str(exc).removeprefix(f'{block.path}: ')} (load_kernel skips it{remedy})")


@dataclass(frozen=True)
class _ShowTarget:
    """The device whose profile ``show`` lists: one present here (``info``, ``dev``), or, where
    ``-d`` names a profile's file and no device here, that profile alone (``info`` None)."""

    slug: str
    title: str
    info: Any = None
    dev: Any = None


def _show_target(selector: str | None, folders: Sequence[Any]) -> _ShowTarget:
    """The device ``-d`` names, else a profile named by its slug (trial 32: the shipped H200
    profile could not be read on a machine without one), else DeviceError naming the slugs."""
    from . import device, profiles, settings

    try:  # it builds nothing: a named device (by -d or $AUTOTUNE_DEVICE) need not build
        info, dev = device.select(selector, require_build=not (selector or settings.default_device_selector()))
        return _ShowTarget(info.slug, f"{info.name} ({info.platform})", info, dev)
    except DeviceError as exc:
        files = {p.stem: p for f in reversed(folders) if f.is_dir() for p in sorted(f.glob("*.yaml"))}
        # a part of a file's name, as report's -d takes it (trial 44: `-d h200` was refused),
        # or the file's name itself (trial 95: `-d nvidia-corporation-h200.yaml`)
        selector = profiles.slug_named(selector) if selector else selector
        named = [s for s in files if s == selector] or [s for s in files if selector and selector.lower() in s]
        here = next(((i, d) for i, d in device.list_devices() if named and i.slug == named[0]), None)
        if len(named) == 1 and here is not None:  # trial 46: a part of this device's slug read as absent
            return _ShowTarget(here[0].slug, f"{here[0].name} ({here[0].platform})", *here)
        if len(named) == 1:
            header = profiles.read(files[named[0]], check_entries=False).get("device")
            name = profiles.described(header) if isinstance(header, Mapping) else named[0]
            return _ShowTarget(named[0], f"{name}, not present here")
        if not files:
            raise
        if len(named) > 1:
            raise DeviceError(f"{exc}; {selector!r} is a part of several profiles' names: -d {' | -d '.join(named)}"
                              ) from None
        # trial 71: "a device not present here" listed this host's own devices' profiles too
        raise DeviceError(f"{exc}; or show a profile by the name of its file: -d {' | -d '.join(sorted(files))}"
                          ) from None


def _remedy(why: str, ours: bool) -> str:
    """What replaces an entry load_kernel skips (``why``): a run, where it writes to that profile
    (``ours``) and looks the problem up as it is written (trial 31: said of a shipped entry, and
    of one whose problem was written in part, neither of which a run replaces)."""

    if why.startswith(("its problem is written", "its problem is not one")):  # no run has that problem
        return "write its problem as the spec has it, or delete the entry"
    if not ours:
        return f"runs write to {settings.profiles_dir()}, whose entry for this size is used first"
    return "the next run of its problem replaces it"


def _skipped(spec: Any, entry: Any, facts: Mapping[str, Any] | None) -> str | None:
    """Why load_kernel does not use ``entry`` as it is (KernelSpec.unusable), or, on a device
    of ``facts``, why its configuration is not valid there (trial 47: a hand edit that breaks a
    constraint was listed as usable); None where it does, or ``spec`` is not known here."""
    from .space import canonical, check

    why = None if spec is None else spec.unusable(entry)
    if why is not None or spec is None or facts is None:
        return why
    params = spec.from_stored(entry.params, entry.build_flags, whole=True)
    problem = spec.resolve_problem(entry.problem)
    try:
        invalid = check(spec, canonical(spec, params, problem, facts), problem, facts) if params else None
    except AutotuneError as exc:
        invalid = str(exc)
    return f"its configuration is not valid for its problem on this device ({invalid})" if invalid else None


def _show_entries(title: str, block: _ShowBlock, mine: Mapping[str, Any] | None = None) -> None:
    """One kernel's entries, by problem (sizes in numeric order), in aligned columns; an entry
    load_kernel cannot use as it is (:meth:`_ShowBlock.why_skipped`) says why and what fixes
    it, and one measured on another device than ``mine`` says so (None: the title says it of
    all)."""
    from .profiles import written_for_another
    from .spec import problem_label

    def order(e: Any) -> list[tuple[bool, int, str]]:
        return [(not isinstance(v, int), v if isinstance(v, int) else 0, str(v)) for v in e.problem.values()]

    rows = []
    for e in sorted(block.entries, key=order):
        spec = block.spec_of(e)
        why = block.why_skipped(e)
        other = written_for_another(e.device, mine) if mine is not None else None
        mark = (" (partial)" if e.partial else " (picked at first use, not tuned)" if e.picked else "") + (
            f" (measured on {other}: load_kernel uses it here, with a warning)" if other else "") + (
            f" ({block.use_of(e)}: {why}; {block.remedy(e, why)})" if why else "")
        throughput = ", ".join(f"{v:.1f} {k}" for k, v in e.throughput.items())
        rows.append((problem_label(e.problem), f"{e.time_ms:.4f}", throughput, str(e.trials),
                     f"{_fmt_config(e.params, e.build_flags, spec, e.problem)}{mark}"))
    head = ("problem", "time ms", "throughput", "trials", "params")
    w = [max(len(r[i]) for r in [head, *rows]) for i in range(4)]
    print(f"\n{title}")
    for r in [head, *rows]:
        print(f"  {r[0]:<{w[0]}}  {r[1]:>{w[1]}}  {r[2]:>{w[2]}}  {r[3]:>{w[3]}}  {r[4]}".rstrip())


def _cmd_bench(args: argparse.Namespace) -> int:
    from . import benchmark
    from .loader import tune_command
    from .spec import problem_label

    spec, problem = _spec_and_problem(args)
    r = benchmark.run(spec, problem, args.device)
    print(f"{r.spec.name} on {r.device.name} ({r.device.platform}, driver {r.device.driver}), "
          f"{problem_label(r.problem)}")
    print(f"  config      {r.choice.origin}: {_fmt_full(r.choice.params, r.spec, r.problem)}")
    m = r.measurement
    if not m.ok:
        print(f"  FAILED      {m.status.value}: {m.message}")
        return _EXIT_ERROR
    lo, hi = m.spread
    print(f"  time        {m.median_ms:.4f} ms median of {len(m.times_ms)} (min {lo:.4f}, max {hi:.4f})")
    print("  throughput  " + ", ".join(f"{v:.2f} {k}" for k, v in r.metrics.items()))
    if m.error is not None:
        print(f"  error       {_describe_error(m)}")
    if r.speedup is not None and r.baseline is not None:
        lo, hi = r.baseline.spread
        print(f"  baseline    {r.baseline.median_ms:.4f} ms median (min {lo:.4f}, max {hi:.4f})  -> speed-up "
              f"{r.speedup:.2f}x" + (f" (the two timed in turn, {benchmark.BENCH_ROUNDS + 1} rounds)"
                                     if r.baseline is not m else ""))
        if r.speedup < 1:  # trial 59: 0.85x, said as any other speed-up
            print(f"              slower than the baseline here: the device was busy, or the configuration is not "
                  f"the one for this size; `{tune_command(r.spec, r.problem, r.device)}` tunes it")
    elif r.baseline is not None:
        print(f"  baseline    {r.baseline.status.value}: {r.baseline.message}")
    elif r.baseline_invalid is not None:
        print(f"  baseline    not timed: the baseline variant cannot run this problem ({r.baseline_invalid})")
    for c in r.ceilings:
        share = "".join(f"  -> {name}: {100 * x:.1f}% of it" for name, x in r.ratios(c).items())
        print(f"  ceiling     {c.name}: {c.value:.1f} {c.unit} ({c.how}){share}")
        if c.unit.startswith("GB/s") and any(x > 1 for x in r.ratios(c).values()):
            print("              above the ceiling: this problem's data fits in a cache, which the copy "
                  "does not; a larger size (-s) measures memory")
        elif any(x > 1 for x in r.ratios(c).values()) and c.name in benchmark.DEVICE_CEILINGS:
            # trial 44: 200% of a peak measured under load
            print("              above the ceiling: it was measured low (a busy device?); the profile keeps "
                  "the highest measured, so `autotune bench` on an idle device corrects it")
        elif any(x > 1 for x in r.ratios(c).values()):  # trial 59: a library to beat, not a ceiling
            print(f"              faster than {c.name} (timed now, on this machine as it is: not kept)")
    print(f"  ceilings    {benchmark.keep_ceilings(r)}")
    return 0


def _cmd_report(args: argparse.Namespace) -> int:
    from pathlib import Path

    from . import report

    spec, sizes = _spec_and_problem(args)
    problem = spec.resolve_problem(sizes) if args.size is not None else None
    out = Path(args.output or f"autotune-report-{spec.name}")
    written = report.write(spec, out, args.storage, problem, args.device)
    for s in written.sections:
        print(f"{s.device_name}  {s.label}: {_count(len(s.trials), 'trial')}"
              + (" (earlier spec)" if s.stale else ""))
    print(f"wrote {written.page} and {_count(len(written.figures), 'PNG file')}; open it in a browser")
    return 0


def _cmd_replay(args: argparse.Namespace) -> int:
    from . import replay

    if not args.cache:  # trial 71: "--warm-start b.json a.json" took a.json as well, unsaid
        took = (f" (--warm-start took {', '.join(args.warm_start)}: it takes every file after it); write the "
                "CACHE_FILEs first: autotune replay CACHE_FILE... --warm-start OTHER..." if args.warm_start else "")
        raise OptionError(f"give at least one CACHE_FILE to replay{took}")
    for name, value in (("--seeds", args.seeds), ("-n/--trials", args.trials)):
        if value < 1:
            raise OptionError(f"{name} must be at least 1 (got {value})")
    if args.seed < 0:
        raise OptionError(f"--seed must be 0 or more (got {args.seed})")
    if args.seed + args.seeds > 2**32:  # trial 96: said of --seed, at its default
        raise OptionError(f"the seeds --seed {args.seed} .. {args.seed} + --seeds {args.seeds} - 1 must be below 2**32")
    if not 0 <= args.target < math.inf:
        raise OptionError(f"--target must be a finite percentage of 0 or more (got {args.target:g})")
    args.target += 0.0  # -0 is 0 (trial 97: "within -0%")
    recs = [_recording(path, len(args.cache)) for path in args.cache]  # every file read before the first search
    others: list[Any] = []
    unread: dict[str, str] = {}  # trial 43: one recording of no successful time ended the replay
    for path in args.warm_start:
        try:
            others.append(replay.load(path))
        except ProblemError as exc:
            unread[path] = str(exc).removeprefix(f"{path}: ")
    try:
        _replay_each(args, recs, others, unread)
    except (TuningInterrupted, KeyboardInterrupt) as exc:  # a replay keeps nothing to resume from
        _say("autotune: replay interrupted; the seeds printed above are complete, nothing else is kept "
             "(run it again, with fewer --seeds for a quicker answer)")
        # 143 for a SIGTERM, as every command (trial 37: 130)
        return _STOPPED_BY + (exc.signum if isinstance(exc, TuningInterrupted) else stops.last_stop_signal())
    return 0


def _recording(path: str, given: int) -> Any:
    """The recorded space of CACHE_FILE ``path``, one of ``given``; a ProblemError that says the
    others were not replayed either (trial 123: the good file's replay went missing unsaid)."""
    from . import replay

    try:
        return replay.load(path)
    except ProblemError as exc:
        if given == 1:
            raise
        raise ProblemError(f"{exc}; nothing was replayed, as every CACHE_FILE is read before the first replay: fix "
                           "that file, or leave it out") from None


def _replay_each(args: argparse.Namespace, recs: list[Any], others: list[Any], unread: Mapping[str, str]) -> None:
    """Replay each of ``recs`` from the winners of ``others``; ``unread``: the --warm-start
    files that could not be read, and why."""
    from . import replay

    # a recording named by its file's stem, or by its path where another has that stem (trial 40)
    stems = Counter(o.name for o in [*recs, *others])

    def label(o: Any) -> str:
        return str(o.path) if stems[o.name] > 1 and o.path is not None else str(o.name)

    for rec in recs:
        print(f"{rec.name} ({rec.device}): {rec.valid} valid configuration{'s' * (rec.valid != 1)}, "
              f"optimum {rec.optimum_ms:.6g} ms")  # trial 52: 1.00039 read "1" beside a best of 1.449
        starts, used = replay.warm_starts(rec, others)
        if others or unread:
            names = ", ".join(label(o) for o in used) or "none of the --warm-start recordings"
            given = len(others) + len(unread)
            print(f"  starting from the winners of {names}"
                  + (f" ({len(used)} of {given} used)" if len(used) < given else ""))
            for path, why in unread.items():
                print(f"    not {path}: {why}")
            for other in others:
                if all(other is not o for o in used):
                    why = replay.unusable(rec, other) or "its winner is another's, or more than enough came first"
                    print(f"    not {label(other)}: {why}")
            for other, start in zip(used, starts, strict=True):
                if replay.not_recorded(rec, start):  # (with no recorded neighbour it is not used)
                    print(f"    {label(other)}: its winner is not recorded here (it did not build, or was not "
                          "measured); a recorded configuration one parameter away is measured instead")
        seeds = range(args.seed, args.seed + args.seeds)
        summary = replay.replay_seeds(rec, args.trials, seeds, Sampler(args.sampler),
                                      args.target / 100, each=_replayed(args.target), starts=starts)
        if args.seeds > 1:
            budgets = sorted({min(100, args.trials), args.trials})  # no share past the budget
            print(f"  {args.sampler}, {args.seeds} seeds: median {_within(summary.median_within(), args.trials)} "
                  f"measured to within {args.target:g}%; "
                  + ", ".join(f"within {n}: {summary.share_within(n):.0%}" for n in budgets))


def _replayed(target: float) -> Any:
    def show(r: Any) -> None:
        found = f"within {target:g}% after {r.within}" if r.within else f"not within {target:g}% after {r.measured}"
        ratio = f"{r.ratio:.3f}" if r.ratio < 1000 else f"{r.ratio:.3g}"  # trial 104: 300 digits
        print(f"  seed {r.seed}: {found} measured (best {r.best_ms:.4g} ms, {ratio}x the optimum)")
    return show


def _within(n: float, budget: int) -> str:
    """A replay's measurements to within the target: ``37``, or ``> 400`` when it was not reached."""
    return f"{n:g}" if math.isfinite(n) else f"> {budget}"


def _cmd_probe(args: argparse.Namespace) -> int:
    from . import device, probe

    if not 1 <= args.repeats <= probe.MAX_REPEATS:  # each launch's event is kept until the batch ends
        raise OptionError(f"--repeats must be 1 to {probe.MAX_REPEATS:,} (got {args.repeats:,})")
    info, dev = device.select(args.device)
    print(f"{info.name} ({info.platform}, driver {info.driver})")
    print("  " + probe.launch_overhead(dev, repeats=args.repeats).describe())
    return 0


_COMMANDS = {"bench": _cmd_bench, "probe": _cmd_probe, "run": _cmd_run, "list": _cmd_list,
             "devices": _cmd_devices, "show": _cmd_show, "replay": _cmd_replay,
             "report": _cmd_report}
