"""Claims: which configurations of a shared study are being measured, or were, and by whom.

Several workers (processes, GPUs, hosts) may tune one study in one database. Before a worker
measures a configuration it claims it here; a claim another worker holds, or one already
measured, is refused, so no configuration is measured twice. A claim carries an expiry: a
worker that dies mid-trial (SIGKILL, a lost host) never finishes its claim, and once the
claim has expired another worker may take the configuration over. A live worker's
measurement ends before its claim expires: the claim lasts the measurement's own time
limit plus :data:`GRACE_S`.

The claims live in a table of their own (``autotune_claims``) in the study's database, with
one row per (study, configuration): inserting the row is the atomic "claim", and taking over
an expired one is a conditional update, so two workers can never both win. Hosts are assumed
to keep their clocks in step (NTP), as expiry compares their wall clocks.

Example:
    >>> engine = sa.create_engine("sqlite://")
    >>> mine, theirs = Claims.open(engine, "k|dev|N=8|abc"), Claims(engine, "k|dev|N=8|abc", "other:1")
    >>> mine.take({"TS": 8}, ttl_s=60), theirs.take({"TS": 8}, ttl_s=60), theirs.take({"TS": 4}, ttl_s=60)
    (True, False, True)
"""

from __future__ import annotations

import functools
import hashlib
import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError, OperationalError, ProgrammingError, SQLAlchemyError

from .errors import StorageError
from .processes import gone, owner_name
from .space import config_key
from .spec import Value

T = TypeVar("T")

#: Seconds a claim outlives its measurement's time limit (the kill, the reply, the write).
GRACE_S = 10.0

_META = sa.MetaData()
_TABLE = sa.Table(
    "autotune_claims", _META,
    sa.Column("study", sa.String(512), primary_key=True),
    sa.Column("config", sa.String(64), primary_key=True),  # sha256 of the configuration's key
    sa.Column("owner", sa.String(256), nullable=False),
    sa.Column("expires", sa.Float, nullable=False),
    sa.Column("done", sa.Boolean, nullable=False),
    sa.Column("params", sa.Text, nullable=False),  # the configuration itself (config_key), to read back
)


def _answering(method: Callable[..., T]) -> Callable[..., T]:
    """A database error in a claim method becomes StorageError, in one line."""
    @functools.wraps(method)
    def wrapped(*args: Any, **kwargs: Any) -> T:
        try:
            return method(*args, **kwargs)
        except SQLAlchemyError as exc:
            raise StorageError.lost(exc) from None
    return wrapped


class Claims:
    """One study's claims in its database; every method is one short transaction.

    Without a database (``engine`` None: a study in memory) there is one worker, and every
    claim is granted.
    """

    def __init__(self, engine: sa.engine.Engine | None, study: str, owner: str) -> None:
        self.engine, self.study, self.owner = engine, study, owner

    @classmethod
    def open(cls, engine: sa.engine.Engine | None, study: str) -> Claims:
        if engine is None:
            return cls(None, study, owner_name())
        try:
            _META.create_all(engine, checkfirst=True)
        except (OperationalError, ProgrammingError, IntegrityError):
            # another worker created the table at the same moment: it exists now
            _META.create_all(engine, checkfirst=True)
        return cls(engine, study, owner_name())

    def _where(self, params: Mapping[str, Value]) -> tuple[Any, str, str]:
        key = config_key(params)
        digest = hashlib.sha256(key.encode()).hexdigest()
        return sa.and_(_TABLE.c.study == self.study, _TABLE.c.config == digest), digest, key

    @_answering
    def take(self, params: Mapping[str, Value], ttl_s: float) -> bool:
        """Claim ``params`` for ``ttl_s`` seconds: False when another worker holds it, or it
        was measured."""
        if self.engine is None:
            return True
        where, digest, key = self._where(params)
        now = time.time()
        try:
            with self.engine.begin() as c:
                c.execute(_TABLE.insert().values(study=self.study, config=digest, owner=self.owner,
                                                 expires=now + ttl_s, done=False, params=key))
            return True
        except IntegrityError:
            pass  # claimed before: take it over only if that claim expired unfinished, or its
            # owner was a process of this host that is gone (trial 35: a killed run's claim on
            # the baseline kept the next run from it for its 5 minutes)
        with self.engine.begin() as c:
            held = c.execute(sa.select(_TABLE.c.owner).where(where, _TABLE.c.done.is_(False))).scalar()
            over = _TABLE.c.expires < now
            if held is not None and held != self.owner and gone(held):
                over = sa.or_(over, _TABLE.c.owner == held)
            taken = c.execute(_TABLE.update().where(where, _TABLE.c.done.is_(False), over)
                              .values(owner=self.owner, expires=now + ttl_s))
        return bool(taken.rowcount == 1)

    @_answering
    def reopen(self, params: Mapping[str, Value], ttl_s: float) -> bool:
        """Claim a measured ``params`` to measure it again (a timeout under a shorter limit):
        False when it is not measured, or another worker reopened it first."""
        if self.engine is None:
            return True
        where = self._where(params)[0]
        with self.engine.begin() as c:
            taken = c.execute(_TABLE.update().where(where, _TABLE.c.done.is_(True))
                              .values(owner=self.owner, expires=time.time() + ttl_s, done=False))
        return bool(taken.rowcount == 1)

    @_answering
    def lost(self, params: Mapping[str, Value]) -> bool:
        """Whether this worker's claim on ``params`` is no longer its own: it lapsed (the
        process was stopped past it) and another worker took the configuration over."""
        if self.engine is None:
            return False
        with self.engine.begin() as c:
            owner = c.execute(sa.select(_TABLE.c.owner).where(self._where(params)[0])).scalar()
        return owner != self.owner

    @_answering
    def finish(self, params: Mapping[str, Value]) -> None:
        """``params`` was measured (and is in the study): no worker measures it again."""
        if self.engine is not None:
            where = self._where(params)[0]
            with self.engine.begin() as c:
                c.execute(_TABLE.update().where(where, _TABLE.c.owner == self.owner).values(done=True))

    @_answering
    def release(self, params: Mapping[str, Value]) -> None:
        """Give ``params`` back unmeasured (the run stopped first)."""
        if self.engine is not None:
            where = self._where(params)[0]
            with self.engine.begin() as c:
                c.execute(_TABLE.delete().where(where, _TABLE.c.owner == self.owner, _TABLE.c.done.is_(False)))

    @_answering
    def forget_measured(self) -> None:
        """Drop the study's finished claims: for a study that holds no trial, they are a deleted
        study's of the same name (trial 53: optuna.delete_study left them, and every proposal
        of the study made anew was skipped as measured, until --timeout)."""
        if self.engine is not None:
            with self.engine.begin() as c:
                c.execute(_TABLE.delete().where(_TABLE.c.study == self.study, _TABLE.c.done.is_(True)))

    @_answering
    def count(self, done_only: bool = False, others_only: bool = False) -> int | None:
        """Configurations measured (``done_only``) or measured and being measured in the
        study, every worker's or (``others_only``) all but this one's (None in memory). A dead
        worker's claims count until they expire."""
        if self.engine is None:
            return None
        live = _TABLE.c.done.is_(True) if done_only else sa.or_(_TABLE.c.done.is_(True),
                                                                _TABLE.c.expires >= time.time())
        whose = _TABLE.c.owner != self.owner if others_only else sa.true()
        with self.engine.begin() as c:
            return int(c.execute(sa.select(sa.func.count()).select_from(_TABLE).where(
                _TABLE.c.study == self.study, live, whose)).scalar_one())

    @_answering
    def expired(self) -> list[dict[str, Value]]:
        """Configurations whose worker died mid-trial (claimed, unfinished, and expired, or held
        by a process of this host that is gone): the search chose them, so the next worker
        takes them over (trial 44: a run resumed at once after a SIGKILL waited for the killed
        one's claims to expire)."""
        if self.engine is None:
            return []
        now = time.time()
        with self.engine.begin() as c:
            rows = c.execute(sa.select(_TABLE.c.params, _TABLE.c.owner, _TABLE.c.expires).where(
                _TABLE.c.study == self.study, _TABLE.c.done.is_(False))).all()
        return [json.loads(r.params) for r in rows
                if r.expires < now or (r.owner != self.owner and gone(r.owner))]

    @_answering
    def held(self) -> list[Claim]:
        """Every claim of the study (what is being measured where, and what was)."""
        if self.engine is None:
            return []
        with self.engine.begin() as c:
            rows = c.execute(sa.select(_TABLE.c.params, _TABLE.c.owner, _TABLE.c.expires, _TABLE.c.done)
                             .where(_TABLE.c.study == self.study)).all()
        return [Claim(json.loads(r.params), r.owner, r.expires, bool(r.done)) for r in rows]


@dataclass(frozen=True)
class Claim:
    """One configuration's claim: who took it, until when, whether it was measured."""

    params: dict[str, Value]
    owner: str
    expires: float
    done: bool
