from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from autotune import cli
from autotune.cli import parse_size
from autotune.errors import ProblemError

KEYS = ["M", "N", "K"]


def test_size_forms():
    assert parse_size("512", KEYS) == {"M": "512", "N": "512", "K": "512"}
    assert parse_size("64x32x16", KEYS) == {"M": "64", "N": "32", "K": "16"}
    assert parse_size("M=8,layout=col", KEYS) == {"M": "8", "layout": "col"}
    assert parse_size("512,M=8", KEYS) == {"M": "8", "N": "512", "K": "512"}  # all, then one
    with pytest.raises(ProblemError, match=r"^--size '0x10000': '0x10000' is hexadecimal; write sizes in decimal "
                       r"\(65536\)$"):  # trial 103: "2 dimensions given"
        parse_size("0x10000", ["N"])
    with pytest.raises(ProblemError, match="is not a size"):  # trial 107: digits of other scripts
        parse_size("\u0663\u0662", ["N"])


def test_an_empty_size_or_a_key_given_twice_is_an_error_not_a_silent_choice(capsys):
    from autotune import cli

    with pytest.raises(ProblemError, match="gives M twice"):
        parse_size("M=64,M=128", KEYS)
    with pytest.raises(ProblemError, match=r"gives K twice \(K=64, then 128\); give the sizes first, then the key: "
                                           r"128,K=64$"):
        parse_size("K=64,128", KEYS)  # trial 33: tuned K=128
    with pytest.raises(ProblemError, match=r"gives M twice \(M=128, then 64x32x16\)"):
        parse_size("M=128,64x32x16", KEYS)
    with pytest.raises(ProblemError, match=r"gives the sizes twice \(128, then 256\)"):
        parse_size("128,256", KEYS)  # tuned 256
    with pytest.raises(ProblemError, match=r"^--size '2048,512,64': sizes in order are joined by x \(2048x512x64\), or "
                                           r"give each as key=value \(M=2048,N=512,K=64\)$"):
        parse_size("2048,512,64", KEYS)  # trial 113: told "e.g. 2048,K=64"
    assert parse_size("128,layout=col,K=64", KEYS) == {"M": "128", "N": "128", "K": "64", "layout": "col"}
    for text in ("M=64,,N=3", "512,", ",512"):  # trial 25: accepted silently, where --device refuses it
        with pytest.raises(ProblemError, match=rf"^--size '{text}' has an empty item; separate items with single"):
            parse_size(text, KEYS)
    for argv in (["run", "matmul", "-s", ""], ["report", "matmul", "-s", " "]):
        assert cli.main(argv) == 1
        assert "names no size" in capsys.readouterr().err


@pytest.mark.parametrize("bad", ["abc", "64x32", "1.5", "-3"])
def test_bad_sizes_say_how_to_write_them(bad):
    with pytest.raises(ProblemError, match="--size"):
        parse_size(bad, KEYS)


def test_autotunes_warnings_are_one_line_and_others_keep_their_form(monkeypatch, capsys):
    """bench, run and show warn through the loader (no tuned entry, a stale profile): the CLI
    prints those as one line, as it does errors; a warning of another library goes to Python's
    hook as before."""
    import warnings

    from autotune import cli
    from autotune.errors import AutotuneWarning

    def noisy(args):
        warnings.warn(AutotuneWarning("no tuned matmul for X; using the default configuration"), stacklevel=2)
        warnings.warn("a library's own warning", DeprecationWarning, stacklevel=2)
        return 0

    monkeypatch.setitem(cli._COMMANDS, "list", noisy)
    others: list[str] = []
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        hook = warnings.showwarning = lambda message, *rest, **kw: others.append(str(message))
        assert cli.main(["list"]) == 0
        assert warnings.showwarning is hook, "the hook is back after the command"
    assert capsys.readouterr().err == "autotune: warning: no tuned matmul for X; using the default configuration\n"
    assert others == ["a library's own warning"]


@pytest.mark.parametrize("action", ["error", "ignore"])
def test_autotunes_warnings_are_printed_whatever_the_warnings_filter_says(monkeypatch, capsys, action):
    """Trial 83: under PYTHONWARNINGS=error every warning of a command was a traceback (bench's
    after its first-use pick was saved)."""
    import warnings

    from autotune import cli
    from autotune.errors import AutotuneWarning

    def warns(args):
        warnings.warn(AutotuneWarning("another autotune command is measuring on X now"), stacklevel=2)
        return 0

    monkeypatch.setitem(cli._COMMANDS, "list", warns)
    with warnings.catch_warnings():
        warnings.simplefilter(action)
        assert cli.main(["list"]) == 0
    assert capsys.readouterr().err == "autotune: warning: another autotune command is measuring on X now\n"


def test_one_number_for_several_size_keys_that_the_spec_refuses_says_which_keys_it_set(capsys):
    from autotune import cli

    assert cli.main(["run", "mathpath", "-s", "4096", "--storage", ":memory:", "--no-save"]) == 1
    err = capsys.readouterr().err
    assert "mathpath needs P <= 127 (P=4096); -s 4096 sets every size key (N, P)" in err
    assert "e.g. -s N=4096" in err and err.count("\n") == 1


@pytest.mark.parametrize("argv, command", [(["run", "reverse", "--compile-ahead", "-1"], "run"),
                                           (["run", "reverse", "--bogus"], "run"),
                                           (["show", "reverse", "extra"], "show"),
                                           (["replay", "x.json", "--sed", "3"], "replay")])
def test_a_usage_error_is_reported_by_its_command_with_exit_2(capsys, argv, command):
    from autotune import cli

    try:
        code = cli.main(argv)
    except SystemExit as stop:  # argparse's own
        code = stop.code
    err = capsys.readouterr().err
    assert code == 2 and err.startswith(f"autotune {command}: error: ")
    assert f"see `autotune {command} --help`" in err


@pytest.mark.parametrize("argv, hint", [(["replay", "x.json", "--target", "-inf"], "--target=-inf"),
                                        (["run", "reverse", "-t", "-1e3"], "--timeout=-1e3"),
                                        (["run", "reverse", "-n"], None),
                                        (["replay", "x.json", "--target", "--", "-5"], None)])  # trial 101: '--'=
def test_a_value_that_starts_with_a_dash_is_told_how_to_be_written(capsys, argv, hint):
    """argparse takes -inf for an option and says only that --target expected a value (trial 97)."""
    from autotune import cli

    with pytest.raises(SystemExit) as stop:
        cli.main(argv)
    err = capsys.readouterr().err
    assert stop.value.code == 2 and "expected one argument" in err
    assert (f"a value that starts with '-' is written {hint} " in err) if hint else "starts with '-'" not in err


def test_a_zero_size_gets_no_hint_that_would_fail_the_same_way(capsys):
    from autotune import cli

    assert cli.main(["run", "matmul", "-s", "0", "--storage", ":memory:"]) == 1
    err = capsys.readouterr().err
    assert "must be a positive integer" in err and "M=0" not in err


@pytest.mark.parametrize("argv", [["run", "reverse", "--storage", ""], ["report", "reverse", "--storage", " "],
                                  ["report", "reverse", "-o", ""], ["show", "-d", ""]])
def test_an_empty_value_is_a_usage_error_not_the_default(capsys, argv):
    from autotune import cli

    with pytest.raises(SystemExit) as stop:
        cli.main(argv)
    assert stop.value.code == 2 and re.search(rf"argument (-\w/)?{argv[-2]}\S*: is empty; ", capsys.readouterr().err)


def test_a_ctrl_c_while_the_command_loads_its_libraries_ends_quietly_with_exit_130():
    """The command line loads numpy, pyopencl and optuna only inside the command, where a
    Ctrl-C is caught: in the first half-second it printed a KeyboardInterrupt traceback."""
    import subprocess
    import sys

    code = """
import builtins, sys
import autotune.cli as cli
assert not {"numpy", "pyopencl", "optuna"} & set(sys.modules), "loaded before the command"
real = builtins.__import__
def interrupted(name, *args, **kwargs):
    if name in ("numpy", "pyopencl", "optuna"):
        raise KeyboardInterrupt  # as a Ctrl-C landing while the libraries load
    return real(name, *args, **kwargs)
builtins.__import__ = interrupted
sys.exit(cli.main(["run", "reverse"]))
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stderr) == (130, "autotune: interrupted\n")


@pytest.mark.parametrize("option", ["--timeout", "--study-timeout", "--max-time-per-config"])
def test_an_infinite_time_limit_is_refused_as_not_finite(capsys, option):
    from autotune import cli

    assert cli.main(["run", "reverse", option, "inf"]) == 2
    assert f"{option} must be a positive, finite number of seconds (got inf)" in capsys.readouterr().err


def test_sqlalchemys_logged_errors_during_a_command_print_no_traceback():
    """Trial 25: a SIGTERM landing inside a SQLAlchemy fetch made it log "Error closing cursor"
    with a 30-line traceback before autotune's one line (1 stop in 13)."""
    import subprocess
    import sys

    code = """
import logging, sys
import autotune.cli as cli
def closing(args):
    try:
        raise KeyboardInterrupt
    except KeyboardInterrupt:
        logging.getLogger("sqlalchemy.pool.impl.QueuePool").error("Error closing cursor", exc_info=True)
    return 0
cli._COMMANDS["devices"] = closing
code = cli.main(["devices"])
print("after", file=sys.stderr)
logging.getLogger("sqlalchemy.pool.impl.QueuePool").error("outside a command")
sys.exit(code)
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stderr == "after\noutside a command\n", done.stderr


@pytest.mark.parametrize("entry, loading", [
    # `from .cli import console`: the stop comes while the command's modules load (a traceback from
    # inside an import, and exit status 1, before)
    ("from autotune import _entry as entry", 'name == "cli"'),
    # trial 103's left-over: importing the package (45 ms on 2 cores) comes before autotune._entry
    # sets its handlers; the console script is a module outside the package that sets them first
    ('import _autotune_entry as entry\nassert "autotune" not in sys.modules',
     'name.startswith("autotune") and "autotune" not in sys.modules'),
])
def test_a_stop_while_the_command_loads_ends_it_without_a_traceback(entry, loading):
    script = f"""
import builtins, os, signal, sys
signal.signal(signal.SIGINT, signal.SIG_DFL)  # as from a terminal: a background job's is ignored, and kept so
{entry}
real = builtins.__import__
def importing(name, *args, **kw):
    if {loading}:
        os.kill(os.getpid(), signal.SIGINT)
    return real(name, *args, **kw)
builtins.__import__ = importing
sys.exit(entry.main())
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert out.returncode == 130 and out.stderr.strip() == "autotune: interrupted", out.stderr


def test_the_console_script_is_the_module_outside_the_package():
    from importlib.metadata import entry_points

    (script,) = [e for e in entry_points(group="console_scripts") if e.name == "autotune"]
    assert script.value == "_autotune_entry:main"


@pytest.mark.parametrize("argv, said", [
    (["run", "matmul", "-d", "0:0", "--device", "1:0"], "argument -d/--device: given twice ('0:0', then '1:0'); give "
                                                        "it once, e.g. --device 0:0,1:0"),
    (["show", "matmul", "-d", "0:0", "-d", "1:0"], "argument -d/--device: given twice ('0:0', then '1:0'); give it "
                                                   "once (see"),
    (["bench", "matmul", "--size", "512", "-s", "1024"], "argument -s/--size: given twice ('512', then '1024'); give "
                                                         "the sizes once (see"),  # trial 112: not "-s 512,1024"
])
def test_an_option_given_twice_is_a_usage_error_not_the_last_alone(capsys, argv, said):
    """Trial 110: a second -s replaced the first without a word, and the run tuned another problem."""
    with pytest.raises(SystemExit) as stop:
        cli.main(argv)
    assert stop.value.code == 2 and said in capsys.readouterr().err


def test_an_option_given_twice_alike_is_taken_once_and_sizes_of_other_keys_are_joined():
    args = cli.build_parser().parse_args(["run", "matmul", "-s", "512", "-s", "512"])
    assert args.size == "512"
    # trial 114: refused, with a fix that dropped K
    args = cli.build_parser().parse_args(["run", "matmul", "-s", "M=512", "-s", "N=256", "--size", "K=128"])
    assert args.size == "M=512,N=256,K=128"
    # trial 115: a repeated item, and sizes after a key
    args = cli.build_parser().parse_args(["run", "matmul", "-s", "M=512", "-s", "N=256", "-s", "N=256"])
    assert args.size == "M=512,N=256"
    assert cli.build_parser().parse_args(["run", "matmul", "-s", "K=128", "-s", "512"]).size == "512,K=128"
    for one in ("2048,512", "512,"):  # trial 117: one -s is parse_size's to judge ("given twice (None, ...)")
        assert cli.build_parser().parse_args(["run", "matmul", "-s", one]).size == one
    with pytest.raises(ProblemError, match=r"gives M twice"):  # two values of one key: parse_size says so
        cli.parse_size(cli.build_parser().parse_args(["run", "matmul", "-s", "M=1", "-s", "M=2"]).size, KEYS)


def test_with_stderr_closed_errors_and_warnings_stay_out_of_stdout(tmp_path):
    """Trial 57: with fd 2 closed (`2>&-`), sys.stderr is None and print() wrote the error line
    and warnings to stdout, into the JSON a script reads there."""
    env = {**os.environ, "AUTOTUNE_HOME": str(tmp_path), "AUTOTUNE_SYSTEM_OPENCL": "maybe"}
    out = subprocess.run([sys.executable, "-m", "autotune", "show", "nosuch", "--json"], stdout=subprocess.PIPE,
                         text=True, timeout=120, env=env, preexec_fn=lambda: os.close(2))
    assert out.returncode == 1 and out.stdout == "", out.stdout


@pytest.mark.parametrize("argv", [["--help"], ["--version"], ["run", "--help"]])
def test_help_that_cannot_be_written_is_an_error_not_a_silent_success(argv):
    """Trial 71: `autotune --help >/dev/full` exited 0, the help lost (argparse drops the error)."""
    import subprocess
    import sys

    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full here")
    with open("/dev/full", "w") as full:
        done = subprocess.run([sys.executable, "-m", "autotune", *argv], stdout=full, stderr=subprocess.PIPE,
                              text=True, timeout=60)
    assert (done.returncode, done.stderr) == (1, "autotune: error: cannot write standard output (No space left on "
                                                 "device)\n")


@pytest.mark.parametrize("argv, said", [
    (["--json", "list"], "autotune: error: --json goes after the command: autotune COMMAND --json ..."),
    (["show", ""], "autotune show: error: KERNEL is empty; give a kernel name or spec path"),
])
def test_an_option_before_its_command_or_an_empty_kernel_is_said_so(capsys, argv, said):
    """Trial 71: `--json list` was told list takes no --json; `show ''` showed every kernel."""
    from autotune import cli

    try:
        code = cli.main(argv)
    except SystemExit as stop:  # argparse's own
        code = stop.code
    assert code == 2 and capsys.readouterr().err.startswith(said)


def test_a_folder_or_extensionless_file_named_as_a_kernel_is_said_so(tmp_path, monkeypatch):
    """Trial 71: `run d` with a folder d here said only "unknown kernel 'd'"."""
    from autotune import spec as specs
    from autotune.errors import SpecError

    monkeypatch.chdir(tmp_path)
    (tmp_path / "d").mkdir()
    (tmp_path / "noext").write_text("kernel: x\n")
    with pytest.raises(SpecError, match=r"unknown kernel 'd'; ./d is a folder: a spec is named by its path"):
        specs.resolve("d")
    with pytest.raises(SpecError, match=r"./noext is a file without .yaml or .yml"):
        specs.resolve("noext")
    (tmp_path / "matmul2").mkdir()  # trial 73: the near miss went unsaid
    with pytest.raises(SpecError, match=r"unknown kernel 'matmul2'; did you mean 'matmul'\? ./matmul2 is a folder"):
        specs.resolve("matmul2")


@pytest.mark.parametrize("argv, said", [
    (["-d", "0:0", "show"], "autotune: error: -d goes after the command: autotune COMMAND -d ..."),
    (["--storage=x", "run", "matmul"], "autotune: error: --storage goes after the command"),
])
def test_an_option_with_a_value_before_the_command_is_said_to_go_after_it(capsys, argv, said):
    """Trial 76: `autotune -d 0:0 show` was "argument COMMAND: invalid choice: '0:0'"."""
    from autotune import cli

    assert cli.main(argv) == 2 and capsys.readouterr().err.startswith(said)


def test_an_unknown_option_before_the_command_is_argparses_and_a_closed_stderr_keeps_stdout_clean():
    """Trial 79: `--frob list` was told to go after the command, which has no --frob; with
    stderr closed a usage error was written to stdout."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "autotune", "--frob", "list"], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 2 and "unrecognized arguments: --frob" in done.stderr, done.stderr
    closed = subprocess.run([sys.executable, "-m", "autotune", "bogus"], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True, timeout=60, pass_fds=(), close_fds=True,
                            preexec_fn=lambda: os.close(2))
    assert (closed.returncode, closed.stdout) == (2, "")


def test_a_tmpdir_or_autotune_cache_that_is_no_usable_folder_is_warned_of(tmp_path, monkeypatch, capsys):
    """Trial 83: a TMPDIR that is a file or read-only sent a run's files (1.5 GB at matmul 8192^3)
    to /tmp, and an AUTOTUNE_CACHE that is a file cached nothing, without a word."""
    import tempfile

    from autotune import cli

    a_file = tmp_path / "afile"
    a_file.write_text("")
    monkeypatch.setattr(tempfile, "tempdir", None)  # chosen again from the environment
    monkeypatch.setenv("TMPDIR", str(a_file))
    monkeypatch.setenv("AUTOTUNE_CACHE", str(a_file))
    assert cli.main(["list"]) == 0
    err = capsys.readouterr().err.splitlines()
    assert err == [f"autotune: warning: AUTOTUNE_CACHE ({a_file}) is not a folder, so nothing is cached there (each "
                   "command checks the devices' builds again); set it to a folder",
                   f"autotune: warning: TMPDIR ({a_file}) cannot be written (not a folder, read-only, or full): "
                   f"temporary files (a run's inputs and expected outputs) go to {tempfile.gettempdir()} instead; set "
                   "it to a writable folder with room"], err
    monkeypatch.setattr(tempfile, "tempdir", None)
    monkeypatch.setenv("TMPDIR", str(tmp_path) + "/")
    monkeypatch.setenv("AUTOTUNE_CACHE", str(tmp_path / "cache"))
    assert cli.main(["list"]) == 0 and capsys.readouterr().err == ""


def test_a_stop_after_the_command_set_its_handlers_is_no_interruption_of_the_first_code(monkeypatch):
    """A Ctrl-C that landed as a finished command returned (its handlers put back to the first
    code's) exited 130, "interrupted", under load (a suite run on a busy machine)."""
    import signal

    from autotune import _entry, cli

    monkeypatch.setattr(_entry, "_COMMAND_STARTED", [False])
    with pytest.raises(_entry._Stopped):
        _entry._stop(signal.SIGINT, None)  # while the modules load: the command has not started
    monkeypatch.setitem(cli._COMMANDS, "list", lambda args: 0)
    assert cli.main(["list"]) == 0 and _entry._COMMAND_STARTED == [True]
    _entry._stop(signal.SIGINT, None)  # after: its outcome stands


def test_a_global_size_that_is_no_multiple_of_the_work_group_gets_the_round_up(capsys):
    """Trial 113: `global: [W // TX]` at W=1000 left 3 of 576 valid, the rounding up unsaid."""
    from types import SimpleNamespace

    report = SimpleNamespace(ruled_out=[("st: global size 1000 not divisible by local 16", 0.9)], never_valid=(),
                             invalid_drawn=0.95)
    lines = cli._ruled_out(report)
    assert "round the global size up to one, e.g. global: [\"ceil(N / WG) * WG\"]" in lines[-1]
    # trial 126: the whole share first, so that the commonest reasons do not read as all of it
    assert lines[0] == ("              about 95% of combinations drawn at random are invalid here, each counted by "
                        "the first check it fails:"), lines
    assert len(cli._ruled_out(SimpleNamespace(ruled_out=[("constraint 'WG < 64'", 0.9)], never_valid=(),
                                              invalid_drawn=0.9))) == 2


def test_values_in_no_valid_configuration_are_listed_with_their_reasons_and_not_cut_off():
    """Trial 124: the line was clipped at 400 characters, so the values left without a reason
    lost the words that said so; trial 123: they read as the previous group's."""
    from types import SimpleNamespace

    from autotune.ruledout import NeverValid

    never = [NeverValid("ALGO", "unrolled", "constraint 'ALGO == 0'"),
             *(NeverValid(f"U{i}", v, None, looked=False) for i in range(7) for v in range(10)),
             NeverValid("V", 3, None, certain=False)]
    lines = cli._ruled_out(SimpleNamespace(ruled_out=[], never_valid=never))
    assert lines == [
        "              valid in no configuration here: ALGO=unrolled (mostly: constraint 'ALGO == 0'); U0=0, U0=1, "
        "U0=2, U0=3, U0=4, U0=5, U0=6, U0=7 and 62 more (not looked into: a reason is sought for at most 12 values, "
        "in 0.5 s)",
        "              no valid configuration found (the count is an estimate) with: V=3"], lines


def test_a_stopped_run_whose_profile_kept_its_entry_says_so_in_words():
    """Trial 116: "best so far not saved: ….yaml kept (trial count updated)" read as a save."""
    from types import SimpleNamespace

    report = SimpleNamespace(profile_path="/p/dev.yaml", profile_verdict="kept (trial count updated)",
                             profile_kept=None)
    assert cli._saved(report, "best so far", True) == ("best so far not saved: /p/dev.yaml keeps its entry for this "
                                                        "problem (its trial count updated)")
