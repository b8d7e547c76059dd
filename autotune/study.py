"""The study log: a tuning run's trials in optuna storage, and what was measured so far.

One study per kernel, device, problem and spec hash, so running the same command again
resumes it. The sampler works on a copy in memory; finished trials are stored one transaction
each (see :class:`StudyLog`). Every trial carries its :class:`~autotune.result.Measurement` as user attributes
(:meth:`Measurement.attrs`), so ``seen`` (configuration → measurement) is rebuilt from any
storage, and nothing is measured twice.

Example:
    >>> log = StudyLog.open("k|dev|N=8|abc", ":memory:", optuna.samplers.RandomSampler(0))
    >>> trial = log.ask({"TS": 8}, {"TS": optuna.distributions.CategoricalDistribution([4, 8])})
    >>> recorded = log.tell(trial, Measurement(Status.OK, times_ms=(1.0,), params={"TS": 8}))
    >>> log.measured_total, log.best.params, recorded.number
    (1, {'TS': 8}, 0)
"""

from __future__ import annotations

import hashlib
import math
import os
import queue
import random
import socket
import sqlite3
import threading
import time
import urllib.parse
import warnings
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from contextlib import closing, contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import optuna
import sqlalchemy
from filelock import FileLock, Timeout

from . import settings
from .errors import AutotuneWarning, ProblemError, StorageError, first_line, warn
from .result import Measurement, Status
from .space import config_key
from .spec import Value

#: ``--storage`` value for a study kept in memory only (tests, throw-away experiments).
IN_MEMORY = ":memory:"
#: Trials the sampler's in-memory copy keeps (see StudyLog._compact).
MODEL_WINDOW = 200
#: Seconds between looks at other workers' trials (StudyLog.refresh).
REFRESH_S = 1.0
#: The stored study's user attribute: when its first worker started (for --study-timeout).
_STARTED = "autotune_started_at"
#: Seconds a SQLite write waits for another connection's lock. Several workers write one study
#: in turns of milliseconds; a lock held longer is a fault, and while sqlite waits Python cannot
#: act on Ctrl-C or --timeout (60 s held a run for 250 s past -t 20: trial 26).
BUSY_TIMEOUT_S = 10
#: The stored study's user attribute: the spec file it tunes (KernelSpec.file_id).
_SPEC_FILE = "autotune_spec_file"
#: Study attributes ``autotune_retimed:<digest of the configuration>``: a configuration's launch
#: times in a run's confirmation rounds (tuner.confirm), which stand for its search timing in
#: later runs: a stopped run's best must not be a configuration those rounds found slower
#: (trial 37: a Ctrl-C saved the search's fastest single timing over the confirmed winner).
_RETIMED = "autotune_retimed:"
#: ``autotune_rejected:<digest>``: a configuration the leaders' check again found wrong (its
#: reason), which stands for its search measurement in later runs (trial 40: a stopped run
#: saved one that read past an in-place output's end, the check again having rejected it).
_REJECTED = "autotune_rejected:"
#: The trial attribute naming the run that measured it (StudyLog.run_id).
RUN = "run"


@dataclass(frozen=True)
class StudyId:
    """A study's name as autotune makes it, and its parts: ``kernel|device slug|problem|spec hash``.

    Example:
        >>> StudyId.parse("matmul|intel-cpu|M=64,layout=row|abc").slug
        'intel-cpu'
    """

    kernel: str
    slug: str
    label: str  # the problem, as spec.problem_label writes it
    spec_hash: str

    @property
    def name(self) -> str:
        return f"{self.kernel}|{self.slug}|{self.label}|{self.spec_hash}"

    @classmethod
    def parse(cls, name: str) -> StudyId | None:
        """The parts of ``name``, or None for a study autotune did not make."""
        parts = name.split("|")
        return cls(*parts) if len(parts) == 4 else None


#: How long a run waits for another to create the SQLite study database it is creating.
LOCK_WAIT_S = 120.0


def shown_url(url: str) -> str:
    """``url`` as autotune prints it: with its password hidden, since summaries, errors and
    reports are shared (trial 33: a report page quoted the database password).

    Example:
        >>> shown_url("postgresql://me:secret@db/studies")
        'postgresql://me:***@db/studies'
    """
    try:
        parsed = sqlalchemy.engine.make_url(url)
    except Exception:  # not a URL sqlalchemy reads (a path, :memory:): nothing to hide  # noqa: BLE001
        return url
    return parsed.render_as_string(hide_password=True) if parsed.password else url


#: The first bytes of every SQLite database file (sqlite.org/fileformat.html).
_SQLITE_HEADER = b"SQLite format 3\x00"


def sqlite_path(url: str) -> Path:
    """The file a ``sqlite:///`` URL names, as SQLite opens it: percent-escapes decoded, a query
    left out (trial 35: ``pct%20x.db`` was locked as itself, while the database was ``pct x.db``).

    Example:
        >>> sqlite_path("sqlite:////tmp/my%20studies.db?timeout=5")
        PosixPath('/tmp/my studies.db')
    """
    try:
        database = sqlalchemy.engine.make_url(url).database
    except Exception:  # noqa: BLE001 - not a URL sqlalchemy reads: the text after the scheme
        database = None
    return Path(database or url[len("sqlite:///"):])


def require_file(url: str) -> None:
    """ProblemError for a SQLite URL that names no database file."""
    if url.split("?")[0] in ("sqlite://", "sqlite:///:memory:", "sqlite:///"):
        raise ProblemError(f"--storage {shown_url(url)!r} names no database file (an in-memory SQLite database, "
                           "which every connection sees new and empty, cannot keep a study); use "
                           "sqlite:///PATH/studies.db, or :memory: for a study this run keeps in memory")


def open_storage(url: str | None, reading: bool = False) -> optuna.storages.BaseStorage:
    """The optuna storage; SQLite files are created under a lock (concurrent first runs).
    ``reading``: for a command that only reads studies (its advice for a bad file differs).

    Raises ProblemError, in one line, for a URL that names no usable database: a bad URL, a
    driver that is not installed, a file that is not a study database, a folder not writable.
    """
    if url == IN_MEMORY:
        return optuna.storages.InMemoryStorage()
    url = url or settings.default_storage()
    require_file(url)
    try:
        if not url.startswith("sqlite:///"):
            return _open_server(_with_driver(url))
        path = sqlite_path(url)
        home = settings.home().absolute()
        if path.absolute().is_relative_to(home):  # autotune's folder is made; another must exist,
            path.parent.mkdir(parents=True, exist_ok=True)  # since a typo would make a study elsewhere
        elif path.parent.exists() and not path.parent.is_dir():
            raise ProblemError(f"--storage {url!r}: {path.parent} is a file, not a folder; give a path in a folder")
        elif not path.parent.is_dir():
            raise ProblemError(f"--storage {url!r}: the folder {path.parent} does not exist; create it, "
                               "or give a path in an existing folder")
        # refused before a lock file is left beside someone's folder (trial 40) or other file
        if path.is_dir():
            raise ProblemError(_storage_problem(url, IsADirectoryError(f"{path} is a folder"), reading))
        if _not_sqlite(path):
            raise ProblemError(_storage_problem(url, sqlite3.DatabaseError("file is not a database"), reading))
        if reading and path.is_file():  # nothing is created: no lock, which a read-only place refuses (trial 40)
            _refuse_foreign(url, path, reading)
            return _reader(url, path)
        lock = str(path) + ".lock"
        open(lock, "a").close()  # a place that takes no file says so now, not after the lock's wait
        with FileLock(lock, timeout=LOCK_WAIT_S):
            # under the lock: another worker creating the tables has made some, not all, of them
            _refuse_foreign(url, path, reading)
            # made here, so that it follows the umask as profiles do: SQLite makes a new file
            # 0644 whatever the umask, and a group's shared folder then refused its other
            # members (trial 44); SQLite gives its -wal and -shm files the database's mode
            path.touch(mode=0o666, exist_ok=True)
            storage = optuna.storages.RDBStorage(url, engine_kwargs={"connect_args": {"timeout": BUSY_TIMEOUT_S}})
            _write_ahead(storage.engine)
            return storage
    except ProblemError:
        raise
    except Timeout as exc:
        raise ProblemError(f"waited {LOCK_WAIT_S:g} s for {exc.lock_file}, which another process holds "
                           "while it creates the study database; try again, or give --storage another "
                           "file") from None
    except OSError as exc:
        raise ProblemError(f"cannot write the study database for {shown_url(url)!r} ({exc.strerror}: {exc.filename}); "
                           "set AUTOTUNE_HOME or --storage to a writable place") from None
    except Exception as exc:  # SQLAlchemy's URL, driver and database errors  # noqa: BLE001
        raise ProblemError(_storage_problem(url, exc, reading)) from None


def study_key(name: str, started: float) -> str:
    """A study's identity in a profile: a digest of its name and the time its first worker
    started it (kept in the study, see :attr:`StudyLog.key`), so that a finished run can tell the stopped run of its own
    study from another's, wherever its database is: a moved AUTOTUNE_HOME, or a URL spelled
    otherwise, keeps it (trial 95: a digest of the storage's path changed when the home moved).

    Example:
        >>> len(study_key("matmul-x", 1.5e9)), study_key("a", 1.0) == study_key("a", 2.0)
        (12, False)
    """
    return hashlib.sha256(f"{name}\0{started!r}".encode()).hexdigest()[:12]


def stored_key(study: optuna.Study) -> str | None:
    """:func:`study_key` of a stored study (None where no worker recorded its start)."""
    started = study.user_attrs.get(_STARTED)
    return None if started is None else study_key(study.study_name, started)


def _reader(url: str, path: Path) -> optuna.storages.RDBStorage:
    """A storage that reads the SQLite study database at ``path``. A write-ahead-log database is
    opened by writing its -shm file beside it: where that cannot be (a read-only place, another
    user's file, a full disk), it is read as it stands, without what a running run has not yet
    copied into it (trial 44: `report` on a read-only mount was refused; trial 95: on a full disk)."""
    if os.access(path, os.W_OK) and os.access(path.parent, os.W_OK):
        try:
            return optuna.storages.RDBStorage(url, engine_kwargs={"connect_args": {"timeout": BUSY_TIMEOUT_S}})
        except Exception as exc:  # SQLAlchemy's errors: only a full disk is read around  # noqa: BLE001
            if "disk I/O error" not in (cause := _root_cause(exc)) and "disk is full" not in cause:
                raise
            warn(f"{path} cannot be opened for writing ({cause}: is its disk full?); read as it stands, "
                 "without the trials a run under way has not yet copied into it")
    frozen = f"sqlite:///{_file_uri(path)}?immutable=1&uri=true"
    return optuna.storages.RDBStorage(frozen, skip_table_creation=True, skip_compatibility_check=True)


def _refuse_foreign(url: str, path: Path, reading: bool) -> None:
    """ProblemError where ``path`` holds another application's SQLite database (see :func:`_foreign`)."""
    if (foreign := _foreign(path, reading)) is not None:  # trial 91: optuna's tables were added to it
        raise ProblemError(f"--storage {shown_url(url)!r}: {path} is {foreign}, not a study database; "
                           + ("give --storage the database a run wrote" if reading else
                              "give --storage a new file, or a study database"))


def _foreign(path: Path, reading: bool) -> str | None:
    """What an SQLite file that holds no study tables holds, where opening it as a study database
    would add optuna's tables to it: another application's database, or (``reading``: a report
    creates nothing) an empty one; None where it holds studies, or is absent or new and empty."""
    try:
        with closing(sqlite3.connect(f"{_file_uri(path)}?mode=ro", uri=True)) as db:
            tables = [t for (t,) in db.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')")]
    except sqlite3.Error:
        return None  # absent, or unreadable: SQLite and optuna say why
    if {"studies", "version_info"} <= set(tables):  # optuna's own (trial 94: an app's `studies` table)
        return None
    if tables:
        return f"an SQLite database of other tables ({', '.join(sorted(tables)[:5])}{', ...' * (len(tables) > 5)})"
    return "an empty database" if reading else None


def _file_uri(path: Path) -> str:
    """SQLite's URI of the file ``path`` (opened with ``uri=True``; options after a ``?``)."""
    return f"file:{urllib.parse.quote(str(path.absolute()), safe='/')}"


def _not_sqlite(path: Path) -> bool:
    """Whether ``path`` holds data that is not a SQLite database (its first 16 bytes are not
    SQLite's header); an absent, empty or unreadable file is left to SQLite to judge."""
    try:
        with open(path, "rb") as f:
            head = f.read(len(_SQLITE_HEADER))
    except OSError:
        return False
    return bool(head) and head != _SQLITE_HEADER


def _write_ahead(engine: Any) -> None:
    """SQLite in write-ahead-log mode, synced at checkpoints: a commit costs a fraction of a
    millisecond instead of several fsyncs, and readers do not wait for a writer. Each trial
    is a claim and a stored trial (two commits), and workers on one host share the file."""
    import sqlalchemy as sa

    def pragmas(connection: Any, record: Any) -> None:
        cursor = connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.close()

    sa.event.listen(engine, "connect", pragmas)
    engine.dispose()  # connections made before the listener reconnect with it


def _with_driver(url: str) -> str:
    """``url`` with the PostgreSQL driver that is installed named, where it names none:
    SQLAlchemy 2.1 reads a bare postgresql:// as psycopg 3, 2.0 as psycopg2 (the driver the
    ``postgres`` extra installs), and the URL in the help has no driver."""
    from importlib.util import find_spec

    scheme, sep, rest = url.partition("://")
    if scheme == "postgresql" and find_spec("psycopg") is None and find_spec("psycopg2") is not None:
        return f"postgresql+psycopg2{sep}{rest}"
    return url


def _open_server(url: str, tries: int = 5) -> optuna.storages.RDBStorage:
    """A database server's storage. Workers that start together all create optuna's tables
    at once, and PostgreSQL lets one of them win and fails the others: open again."""
    from sqlalchemy.exc import IntegrityError, ProgrammingError

    for attempt in range(tries):
        try:
            return optuna.storages.RDBStorage(url)
        except (IntegrityError, ProgrammingError):
            if attempt == tries - 1:
                raise
            time.sleep(0.2 + 0.3 * random.random())
    raise AssertionError("unreachable")


def _root_cause(exc: BaseException) -> str:
    """``Type: first line`` of the innermost cause of ``exc`` (the driver's own error)."""
    seen = {id(exc)}  # a chain can loop back
    while (inner := exc.__cause__ or exc.__context__) is not None and id(inner) not in seen:
        exc = inner
        seen.add(id(exc))
    return f"{type(exc).__name__}: {first_line(exc)}"


def _storage_problem(url: str, exc: Exception, reading: bool = False) -> str:
    """What is wrong with the study database at ``url``, and the fix, in one line. optuna says
    "invalid data in the commit" for most SQLite faults: the driver's reason is its cause."""
    first = _root_cause(exc)
    path = str(sqlite_path(url))
    sqlite = url.startswith("sqlite:///")
    if sqlite and Path(path).is_dir():
        return f"--storage {url!r} names a folder; give a file in it, e.g. sqlite:///{Path(path) / 'studies.db'}"
    if sqlite and Path(path).is_file() and not os.access(path, os.R_OK):  # trial 71: was "read-only"
        return (f"{path} cannot be read ({first}): make it readable to you (chmod u+r, or ask its owner), or "
                "give --storage another database")
    if sqlite and Path(path).is_file() and not os.access(path, os.W_OK) and not reading:
        return (f"{path} is read-only ({first}); a run stores every trial in it: make it writable, or "
                "copy it to a writable place and give that as --storage")
    if "database is locked" in first:
        return (f"{path} is locked: another process held it for over {BUSY_TIMEOUT_S} s ({first}); let that "
                "process finish (a runaway sqlite3 shell, say), or give another --storage")
    if "readonly database" in first or "unable to open database file" in first:
        return (f"cannot write {path} ({first}); make it and its folder writable, or give --storage a "
                "writable place")
    if ("not a database" in first or "malformed" in first) and reading:  # trial 28: not "move it aside"
        return (f"{path} is not a usable study database ({first}); give --storage the database "
                "the runs used (a run's summary names it on its `report` line)")
    if "not a database" in first or "malformed" in first:
        return (f"{path} is not a usable study database ({first}); move it aside to start afresh "
                "(its studies are lost), or give another --storage")
    if not url.startswith("sqlite") and "://" in url and type(exc).__name__ == "OperationalError":
        return (f"--storage {shown_url(url)!r}: cannot reach the database ({first}); check that the server is "
                "running and the URL's user, host or socket folder, and database name")
    if sqlite and ("disk I/O error" in first or "database or disk is full" in first):  # trial 44: "driver"
        return (f"cannot write {path} ({first}): is its disk full? free some space (`df {Path(path).parent}`), "
                "or give --storage a database elsewhere")
    return (f"--storage {shown_url(url)!r} cannot be opened ({first}); give an optuna "
            "storage URL such as sqlite:///PATH/studies.db whose database driver is installed "
            "(PostgreSQL: pip install -e \".[postgres]\" from the checkout)")


@contextmanager
def quiet_optuna() -> Iterator[None]:
    """optuna's per-trial INFO lines off while tuning; the caller's level restored after."""
    previous = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    try:
        yield
    finally:
        optuna.logging.set_verbosity(previous)


def _other_versions(storage: optuna.storages.BaseStorage, name: str) -> dict[str, int]:
    """The measured trials held by studies of ``name``'s kernel, device and problem and another
    spec hash (as a study counts them: not those a stop left unfinished), by the spec file
    each study recorded ("" for a study from before they recorded one)."""
    me = StudyId.parse(name)
    if me is None:
        return {}
    found: Counter[str] = Counter()
    for summary in optuna.get_all_study_summaries(storage, include_best_trial=False):
        other = StudyId.parse(summary.study_name)
        if other is not None and other != me and (other.kernel, other.slug, other.label) == (me.kernel, me.slug,
                                                                                             me.label):
            study = optuna.load_study(study_name=summary.study_name, storage=storage)
            trials = len(study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,)))
            if trials:
                found[str(study.user_attrs.get(_SPEC_FILE, ""))] += trials
    return dict(found)


def spec_file(storage: optuna.storages.BaseStorage, name: str) -> str:
    """The spec file (KernelSpec.file_id) the study ``name`` recorded, "" for one from before
    studies recorded it."""
    return str(optuna.load_study(study_name=name, storage=storage).user_attrs.get(_SPEC_FILE, ""))


def measurement_of(t: optuna.trial.FrozenTrial) -> Measurement | None:
    """The measurement a stored trial holds, or None, warned of, where its record is not one
    autotune writes (trial 43: a trial added by hand with text for its times gave a traceback)."""
    try:
        return Measurement.from_attrs(t.user_attrs, t.params, t.number)
    except (ValueError, TypeError, KeyError) as exc:
        warn(f"trial {t.number} of the study is not a measurement autotune wrote ({first_line(exc)}); "
             "it is left out")
        return None


def supersedes(new: Measurement, old: Measurement) -> bool:
    """Whether ``new``, a later measurement of ``old``'s configuration, replaces it: a timeout
    measured again under a longer limit, or a worker killed from outside measured again (tuner:
    ``_Run.retried``). Otherwise the first stands."""
    return old.status in (Status.TIMEOUT, Status.CRASHED) and new.status is not Status.INVALID


class StudyLog:
    """The trials of one study, and the measurements they hold, by configuration.

    The sampler works on a copy of the study in memory (``study``): with the trials in a
    database, every ask would read them all back and every parameter and attribute would be a
    commit of its own. That copy is kept to the fastest and the most recent trials
    (:meth:`_compact`), so a proposal costs the same at trial 1,000 as at trial 200. Each
    finished trial is written to the stored study in one transaction, by a thread of its own,
    so the writing overlaps the next measurement. Invalid proposals and repeats are not stored:
    they cost no measurement to find again. Call :meth:`close` to finish the writing.
    """

    def __init__(self, study: optuna.Study, store: optuna.Study | None = None,
                 engine: Any = None, storage: optuna.storages.BaseStorage | None = None) -> None:
        self.study = study
        self.store = store
        self._storage = storage  # the database the study is in (other_versions); None in memory
        self.engine = engine  # the database's SQLAlchemy engine (claims.Claims), None in memory
        self._taken_in: set[int] = set()  # stored trials' numbers refresh() has looked at
        self._refreshed = -math.inf  # time.monotonic() of the last refresh()
        # in memory the study is this run's own: it starts now (trial 71: --study-timeout was ignored)
        self._started: float | None = time.time() if store is None else None
        self._held: list[tuple[optuna.trial.FrozenTrial, Callable[[], None] | None]] = []  # see flush()
        self._open: dict[int, optuna.Trial] = {}  # asked, not yet told: id(trial as asked) -> its trial now
        self._writer = _Writer(store) if store is not None else None
        #: stored with each trial: which run measured it, so that the report's search time
        #: leaves out the time between runs (trial 37: a gap under 10 minutes counted)
        self.run_id = f"{socket.gethostname()}:{os.getpid()}:{time.time():.3f}"
        self.seen: dict[str, Measurement] = {}
        self.best: Measurement | None = None
        #: configuration key -> its launch times in the latest confirmation rounds (see _RETIMED),
        #: and -> why the leaders' check again rejected it (see _REJECTED)
        self.retimed, self.rejected = verdicts(store)
        #: configurations built and run in this study, whatever the outcome (counted as noted,
        #: since the loop asks for it every iteration)
        self.measured_total = 0
        #: the candidates earlier runs were measuring when they were stopped (measured since, or
        #: not: the tuner's start list leaves out what is measured, and repeats)
        self.interrupted: list[dict[str, Value]] = []
        for t in study.get_trials(deepcopy=False):
            status = t.user_attrs.get("status")
            if status == Status.INTERRUPTED.value:
                self.interrupted.append(dict(t.params))
            elif status is not None and (m := measurement_of(t)) is not None:
                self._note(m)

    @classmethod
    def open(cls, name: str, storage: str | None, sampler: optuna.samplers.BaseSampler,
             spec_file: str = "") -> StudyLog:
        """The study ``name`` (created if new) in ``storage``; ``spec_file``: the spec file it
        tunes (KernelSpec.file_id), recorded by its first worker."""
        work = optuna.create_study(study_name=name, direction="minimize", sampler=sampler)
        if storage == IN_MEMORY:
            return cls(work)
        opened = open_storage(storage)
        try:
            store = optuna.create_study(study_name=name, storage=opened, direction="minimize",
                                        load_if_exists=True)
            _discard_orphans(store)
            work.add_trials(store.get_trials(deepcopy=False))
            if _STARTED not in store.user_attrs:  # the study's first worker: the clock of --study-timeout
                store.set_user_attr(_STARTED, time.time())
                if spec_file:
                    store.set_user_attr(_SPEC_FILE, spec_file)
            log = cls(work, store, getattr(opened, "engine", None), opened)
            log._started = store.user_attrs.get(_STARTED)  # now: a database lost later leaves the key
        except Exception as exc:  # a database that opened but cannot hold studies  # noqa: BLE001
            # (a damaged page raised from _discard_orphans with a traceback: trial 26)
            raise ProblemError(_storage_problem(storage or settings.default_storage(), exc)) from None
        return log

    def other_versions(self) -> dict[str, int]:
        """The trials of the studies of this kernel, device and problem made with other versions
        of the spec (an edit starts a new study; those stay, and reverting the edit resumes one),
        by spec file ("" unrecorded). It reads every study's summary: asked only of a new study."""
        return {} if self._storage is None else _other_versions(self._storage, self.study.study_name)

    @property
    def key(self) -> str | None:
        """The study's identity in a profile (:func:`study_key`); None for a study in memory."""
        started = self.started_at
        return None if self._storage is None or started is None else study_key(self.study.study_name, started)

    @property
    def started_at(self) -> float | None:
        """When the study's first worker started (time.time()); in memory, when this log was made."""
        if self._started is None and self.store is not None:
            self._started = self.store.user_attrs.get(_STARTED)  # read once: it never changes
        return self._started

    def refresh(self, every_s: float = REFRESH_S) -> list[Measurement] | None:
        """Take in what other workers measured since the last look (a stored study only, at
        most every ``every_s`` seconds): the sampler sees their trials, ``seen`` and ``best``
        their measurements. Returns them, or None when no look was due. (Claims keep workers
        from measuring a configuration twice in between; this is what they learn from each
        other.)

        Reading is incremental: optuna's storage cache fetches only trials it has not seen.
        """
        if self.store is None or time.monotonic() - self._refreshed < every_s:
            return None
        self._refreshed = time.monotonic()
        new = []
        try:
            stored = self.store.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
        except Exception as exc:  # SQLAlchemy's errors: a lost server, a broken file  # noqa: BLE001
            raise StorageError.lost(exc) from None
        for t in stored:
            if t.number in self._taken_in:
                continue
            self._taken_in.add(t.number)
            if "status" in t.user_attrs and config_key(t.params) not in self.seen \
                    and (m := measurement_of(t)) is not None:
                self.study.add_trial(t)
                self._note(m)
                new.append(m)
        try:  # another worker's confirmation since (trial 40: its winner was replaced by a stopped worker)
            retimed, rejected = verdicts(self.store)
        except Exception as exc:  # noqa: BLE001 - as above
            raise StorageError.lost(exc) from None
        self._apply(retimed, rejected)
        return new

    def skip(self, trial: optuna.Trial) -> None:
        """A proposal not measured here (another worker holds it, or the run stopped first):
        failed in the sampler's copy, not stored."""
        self.study.tell(self._close(trial), state=optuna.trial.TrialState.FAIL)

    def get(self, params: Mapping[str, Value]) -> Measurement | None:
        return self.seen.get(config_key(params))

    def number_of(self, params: Mapping[str, Value]) -> int:
        """``params``' number in the study: the configurations in the order first measured, as
        `autotune report` numbers them (0: not measured)."""
        key = config_key(params)
        return next((i for i, k in enumerate(self.seen, 1) if k == key), 0)

    def ask(self, fixed: Mapping[str, Value] | None,
            distributions: Mapping[str, optuna.distributions.BaseDistribution]) -> optuna.Trial:
        """A new trial: ``fixed`` parameters, or the sampler's proposal when None."""
        if fixed is not None:
            self.study.enqueue_trial(dict(fixed))
        trial = self.study.ask(dict(distributions))
        self._open[id(trial)] = trial
        return trial

    def _close(self, trial: optuna.Trial) -> optuna.Trial:
        """The copy's trial for ``trial`` as asked (another after a compaction), now closed."""
        return self._open.pop(id(trial), trial)

    def leaders(self, count: int) -> list[Measurement]:
        """The ``count`` fastest verified configurations timed in full (not pruned), fastest first."""
        timed = [m for m in self.seen.values() if m.ok and not m.pruned]
        return sorted(timed, key=lambda m: m.median_ms)[:count]

    def tell(self, trial: optuna.Trial, m: Measurement, repeat: bool = False,
             then: Callable[[], None] | None = None) -> Measurement:
        """Store ``m`` as the trial's outcome (``repeat``: an earlier trial's measurement);
        ``then`` is called once it is stored (by the writer, or at once in memory)."""
        trial = self._close(trial)
        attrs = {**m.attrs(), RUN: self.run_id, **({"repeat": True} if repeat else {})}
        for key, value in attrs.items():
            trial.set_user_attr(key, value)
        value = m.median_ms * 1e-3 if m.ok else math.inf
        if repeat:  # no new information: a second copy of a value would skew the model
            self.study.tell(trial, state=optuna.trial.TrialState.FAIL)
        else:
            self.study.tell(trial, value)
        if m.status is not Status.INVALID and not repeat:
            self._store(trial, m.params or trial.params, attrs, value, then)
        recorded = replace(m, number=trial.number)
        if not repeat:
            self._note(recorded)
        if len(self.study.get_trials(deepcopy=False)) >= 2 * MODEL_WINDOW:
            self._compact()
        return recorded

    def _compact(self) -> None:
        """Keep the sampler's copy to MODEL_WINDOW trials: the fastest third and the most
        recent others. Every ask scans the copy's trials (for the configuration enqueued), and
        when optuna's TPE proposed, it read them all, which made each proposal tens of
        milliseconds by trial 1,000. The stored study and ``seen`` keep everything; TPE's
        model (autotune.parzen) learns from ``seen``."""
        done = self.study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
        best = sorted(done, key=lambda t: t.value if t.value is not None else math.inf)[:MODEL_WINDOW // 3]
        keep = {t.number for t in best}
        recent = [t for t in done if t.number not in keep][-(MODEL_WINDOW - len(keep)):]
        study = optuna.create_study(study_name=self.study.study_name, direction="minimize",
                                    sampler=self.study.sampler)
        study.add_trials(sorted(best + recent, key=lambda t: t.number))
        for key, trial in list(self._open.items()):  # asked ahead: asked again in the new copy
            study.enqueue_trial(dict(trial.params))
            self._open[key] = study.ask(trial.distributions)
        self.study = study

    def tell_interrupted(self, trial: optuna.Trial) -> None:
        """The trial in flight when the run was stopped: failed, measured again next time."""
        trial = self._close(trial)
        trial.set_user_attr("status", Status.INTERRUPTED.value)
        self.study.tell(trial, state=optuna.trial.TrialState.FAIL)
        self._store(trial, trial.params, {"status": Status.INTERRUPTED.value}, None)

    def _store(self, trial: optuna.Trial, params: Mapping[str, Value], attrs: dict[str, object],
               value: float | None, then: Callable[[], None] | None = None) -> None:
        if self._writer is not None:  # the measured configuration (canonical), not the proposal
            self._held.append((optuna.trial.create_trial(
                params=dict(params), distributions=trial.distributions, user_attrs=attrs, value=value,
                state=optuna.trial.TrialState.COMPLETE if value is not None else optuna.trial.TrialState.FAIL), then))
        elif then is not None:
            then()

    def flush(self) -> None:
        """Hand the finished trials held back to the writer. The tuner calls this right after
        claiming its next candidate: a write running meanwhile would hold SQLite's lock, and the
        claim would wait for it with milliseconds of back-off."""
        # each taken off once queued, so that a stop mid-way leaves only the rest for close() (trial
        # 92: it queued them all again); one the stop landed on is queued twice, and stored once
        # (only a study with a writer holds any: see _store)
        writer = self._writer
        while writer is not None and self._held:
            writer.put(*self._held[0])
            del self._held[0]

    def close(self) -> None:
        """Wait until every finished trial is stored (:meth:`check_stored` says if one was not)."""
        self.flush()
        if self._writer is not None:
            self._writer.close()

    def release(self) -> None:
        """Close the database's pooled connections: a process that tunes again and again (a
        library's) kept four descriptors a run until a garbage collection (trial 75). The engine
        would connect anew if used after."""
        if self.engine is not None:
            self.engine.dispose()

    def abandon(self, why: str) -> None:
        """The database stopped answering (``why``): nothing more is written to it, since each
        write would wait its busy timeout again (trial 57: a run with --timeout 60 went on for
        148 s, writing to a locked database 10 s at a time); what was measured stays here."""
        self.store = None
        if self._writer is not None:
            self._writer.abandon(why)

    def check_stored(self) -> None:
        """ProblemError if a finished trial could not be stored."""
        if self._writer is not None and self._writer.failure:
            n = self._writer.unstored
            raise ProblemError(f"{n} trial{'s' if n != 1 else ''} could not be stored in the study database "
                               f"({self._writer.failure}); the profile was saved; check --storage (a full disk?): "
                               "the next run measures them again")

    def note_confirmed(self, timed: list[Measurement], wrong: Mapping[str, str]) -> None:
        """The confirmation's verdicts: the rounds' timings (``timed``: measurements whose
        times are the rounds') and the configurations its check again rejected (``wrong``: key
        -> why). They stand for those configurations' search measurements here and in the
        stored study, for this run's best and later runs'. A study whose database is gone keeps
        them here."""
        retimed = {config_key(m.params): m.times_ms for m in timed}
        self._apply(retimed, wrong)
        if self.store is None:
            return
        try:
            for key, times in retimed.items():
                self.store.set_user_attr(_RETIMED + _digest(key), {"config": key, "times_ms": list(times)})
            for key, why in wrong.items():
                self.store.set_user_attr(_REJECTED + _digest(key), {"config": key, "message": why[:2000]})
        except Exception:  # noqa: BLE001 - the profile holds the result; only later runs lose it
            pass

    def _apply(self, retimed: Mapping[str, tuple[float, ...]], rejected: Mapping[str, str]) -> None:
        """Take confirmation verdicts in: into ``seen``, and the best again where one is new
        (refresh() reads them all at each look)."""
        fresh = {k for k, times in retimed.items() if self.retimed.get(k) != times} | (rejected.keys() - self.rejected)
        if not fresh:
            return
        self.retimed.update(retimed)
        self.rejected.update(rejected)
        for key in fresh & self.seen.keys():
            self.seen[key] = confirmed(self.seen[key], key, self.retimed, self.rejected)
        ok = [m for m in self.seen.values() if m.ok]
        self.best = min(ok, key=lambda m: m.median_ms) if ok else None

    def _note(self, m: Measurement) -> None:
        key = config_key(m.params)
        m = confirmed(m, key, self.retimed, self.rejected)
        if key not in self.seen:
            self.seen[key] = m
            self.measured_total += m.status is not Status.INVALID
        elif supersedes(m, self.seen[key]):
            self.seen[key] = m
        if m.ok and (self.best is None or m.median_ms < self.best.median_ms):
            self.best = m


def verdicts(store: optuna.Study | None) -> tuple[dict[str, tuple[float, ...]], dict[str, str]]:
    """The confirmations' verdicts a stored study holds: timings (see _RETIMED) and rejections
    (see _REJECTED), by configuration key."""
    retimed: dict[str, tuple[float, ...]] = {}
    rejected: dict[str, str] = {}
    for name, value in (store.user_attrs.items() if store is not None else ()):
        if not (isinstance(value, dict) and isinstance(value.get("config"), str)):
            continue
        times, why = value.get("times_ms"), value.get("message")
        if name.startswith(_RETIMED) and isinstance(times, list) and times and all(
                isinstance(t, (int, float)) and t > 0 for t in times):
            retimed[value["config"]] = tuple(float(t) for t in times)
        elif name.startswith(_REJECTED) and isinstance(why, str):
            rejected[value["config"]] = why
    return retimed, rejected


def confirmed(m: Measurement, key: str, retimed: Mapping[str, tuple[float, ...]],
              rejected: Mapping[str, str]) -> Measurement:
    """``m`` (of configuration ``key``) as the study's confirmations left it (see verdicts):
    wrong where the check again rejected it, else at the rounds' times; ``m`` itself where
    neither changes it."""
    if m.ok and key in rejected:
        return replace(m, status=Status.WRONG_RESULT, message=rejected[key], times_ms=())
    if m.ok and key in retimed and m.times_ms != retimed[key]:
        return replace(m, times_ms=retimed[key])
    return m


def _digest(key: str) -> str:
    """A configuration key's short digest: a study attribute's name (optuna keeps them short)."""
    return hashlib.sha256(key.encode()).hexdigest()[:24]


class _Writer:
    """Stores finished trials in the background, in order, one transaction each."""

    def __init__(self, store: optuna.Study) -> None:
        self.store = store
        self.queue: queue.Queue[tuple[optuna.trial.FrozenTrial, Callable[[], None] | None] | None] = queue.Queue()
        self.failure: str | None = None
        self.unstored = 0  # trials whose write failed
        self.abandoned = False  # the database is gone: no more writes (see abandon)
        # the trials taken off the queue, by id and kept alive so that no id is reused: one queued
        # twice (a stop landing as put returned, and Log.flush queued it again) is stored once
        # (trial 92); told here, in the writer's thread, which no stop interrupts
        self._taken: dict[int, optuna.trial.FrozenTrial] = {}
        self.thread = threading.Thread(target=self._run, name="autotune-study-writer", daemon=True)
        self.thread.start()

    def put(self, trial: optuna.trial.FrozenTrial, then: Callable[[], None] | None = None) -> None:
        """Store ``trial``, once however often it is put; then call ``then`` (not if storing failed)."""
        self.queue.put((trial, then))

    def _run(self) -> None:
        while (item := self.queue.get()) is not None:
            trial, then = item
            if id(trial) in self._taken:  # queued twice
                continue
            self._taken[id(trial)] = trial
            if self.abandoned:
                self.unstored += 1
                continue
            try:
                self.store.add_trial(trial)
                if then is not None:
                    then()
            except Exception as exc:  # a full disk, a lost server: said at close  # noqa: BLE001
                self.unstored += 1
                # the rest would fail the same way, each after the busy timeout (trial 61: a
                # Ctrl-C under another process's lock took two minutes to end the run)
                self.abandon(f"{type(exc).__name__}: {first_line(exc)}")

    def abandon(self, why: str) -> None:
        """Write nothing more: the trials still queued (and any put later) are counted unstored."""
        self.failure = self.failure or why
        self.abandoned = True

    def close(self) -> None:
        """Wait for the queued trials to be written, at most two busy timeouts; once abandoned,
        not for the write in progress either (under another process's lock one add_trial took
        six busy timeouts): the thread is a daemon's, and its write fails or lands on its own."""
        if self.thread.is_alive():
            self.queue.put(None)
            self.thread.join(0 if self.abandoned else 2 * BUSY_TIMEOUT_S)
        if self.thread.is_alive() and not self.abandoned:  # stuck on a database held by another
            self.unstored += self.queue.qsize()  # the write in progress, and those queued after it
            self.abandon(f"the study database did not answer for {2 * BUSY_TIMEOUT_S} s")


def _discard_orphans(study: optuna.Study) -> None:
    """Fail the trials a stopped run of an earlier version left open (runs now store only
    finished trials, so no live worker owns an open one).

    An interrupt between ``enqueue_trial`` and ``ask`` leaves a WAITING trial; the next run's
    ``ask`` would return it instead of the configuration just enqueued, and one configuration
    would never be measured. A run killed mid-trial leaves it RUNNING.
    """
    for _ in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.WAITING,)):
        trial = study.ask()
        trial.set_user_attr("status", Status.INTERRUPTED.value)
        study.tell(trial, state=optuna.trial.TrialState.FAIL)
    for frozen in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,)):
        study.tell(frozen.number, state=optuna.trial.TrialState.FAIL)  # no status: not a result


def stored_measurements(name: str, storage: str | None) -> dict[str, Measurement]:
    """The stored study ``name``'s measurements by configuration (config_key), as a run reads
    them (:class:`StudyLog`, which writes nothing without a store). {} for a study in memory, one
    not found, or a database that cannot be read now (its workers have said why)."""
    if storage == IN_MEMORY:
        return {}
    try:
        study = optuna.load_study(study_name=name, storage=open_storage(storage))
    except Exception:  # noqa: BLE001 - KeyError (none), a lost server: the caller goes on without
        return {}
    with warnings.catch_warnings():  # a trial autotune did not write: its workers warned of it
        warnings.simplefilter("ignore", AutotuneWarning)
        return StudyLog(study).seen


def measured_count(name: str, storage: str | None) -> int:
    """How many configurations the stored study ``name`` has measured (0: no such study)."""
    if storage == IN_MEMORY:
        return 0
    try:
        study = optuna.load_study(study_name=name, storage=open_storage(storage))
    except KeyError:
        return 0
    return sum("status" in t.user_attrs
               for t in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,)))
