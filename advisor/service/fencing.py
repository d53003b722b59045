"""Fencing: a job's writes count only while its worker still holds the job's lease.

A worker that claims a job gets the job's next lease number (``advisor_jobs.lease``, one more
at every claim: the fencing token). While it runs the job, every transaction its thread
commits on any SQLAlchemy engine of the process (Optuna's storage included: the trials, the
study's claims and marks, the probe cache) is checked just before the commit, in the same
transaction: the job's row must still be ``running`` under this lease. On PostgreSQL the
check reads the row ``FOR SHARE``, so a take-over (an UPDATE of that row) waits for the
transaction or the transaction sees the take-over; on SQLite the writer holds the database's
write lock while it checks. A worker paused past its lease (SIGSTOP, a long GC, a network
partition) and then resumed therefore cannot add a trial or a result after another worker
took the job over: its commit raises ``LeaseLost`` and is rolled back.

Only transactions that wrote something are checked (reads cost nothing more), and only in a
thread inside ``fenced(...)``; other threads and processes are untouched.

A worker paused in the middle of a transaction would hold its row locks for as long as it is
paused, blocking the take-over (or its successor's writes to the same rows). PostgreSQL
sessions opened by a fenced thread therefore end a transaction left idle for
``IDLE_TRANSACTION_S`` (``idle_in_transaction_session_timeout``): the locks go with it, and
the paused worker finds its connection closed when it resumes.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

IDLE_TRANSACTION_S = 15  # as the service's own engine (advisor.service.db)
_WRITES = ("INSERT", "UPDATE", "DELETE")
_MARK = "advisor_fenced_write"
_installed: list[bool] = []
_install_lock = threading.Lock()
_current = threading.local()


class LeaseLost(Exception):
    """This worker's lease on the job was taken over (or the job ended): it writes nothing
    more for it."""


@dataclass(frozen=True)
class Lease:
    """A job and the lease number its worker holds."""

    job_id: str
    number: int

    def __post_init__(self) -> None:
        if not self.job_id or self.number < 1:
            raise ValueError(f"a lease needs a job id and a number >= 1, got {self!r}")


@contextlib.contextmanager
def fenced(lease: Lease) -> Iterator[None]:
    """Check every write transaction of this thread against ``lease`` while inside."""
    install()
    previous = getattr(_current, "lease", None)
    _current.lease = lease
    try:
        yield
    finally:
        _current.lease = previous


def current() -> Lease | None:
    """The lease this thread's writes are checked against, if any."""
    return getattr(_current, "lease", None)


def lease_lost(exc: BaseException | None) -> bool:
    """Whether ``exc`` or an exception it came from is ``LeaseLost`` (Optuna and SQLAlchemy
    may re-raise it inside their own)."""
    seen = 0
    while exc is not None and seen < 20:
        if isinstance(exc, LeaseLost):
            return True
        exc = exc.__cause__ or exc.__context__
        seen += 1
    return False


def install() -> None:
    """Add the fencing listeners to SQLAlchemy's engines, once per process. Call it before
    other threads connect (the service's start, a job's start): SQLAlchemy iterates its
    listeners unlocked, and adding one while another thread connected failed a request with
    "deque mutated during iteration" (seen in the fault suite under load)."""
    from sqlalchemy import event
    from sqlalchemy.engine import Engine

    with _install_lock:
        if _installed:
            return
        event.listen(Engine, "connect", _limit_idle_transactions)
        event.listen(Engine, "before_cursor_execute", _note_write)
        event.listen(Engine, "commit", _check_before_commit)
        event.listen(Engine, "rollback", _forget)
        _installed.append(True)


def _limit_idle_transactions(dbapi_conn: Any, _record: Any) -> None:
    if current() is None or not type(dbapi_conn).__module__.startswith("psycopg"):
        return
    with dbapi_conn.cursor() as cur:
        cur.execute(f"SET idle_in_transaction_session_timeout = '{IDLE_TRANSACTION_S}s'")
    dbapi_conn.commit()


def _note_write(
    conn: Any, _cursor: Any, statement: str, _params: Any, _context: Any, _many: bool
) -> None:
    if current() is not None and statement.lstrip()[:6].upper() in _WRITES:
        conn.info[_MARK] = True


def _forget(conn: Any) -> None:
    conn.info.pop(_MARK, None)


def _check_before_commit(conn: Any) -> None:
    lease = current()
    if not conn.info.pop(_MARK, False) or lease is None:
        return
    from sqlalchemy import text

    lock = " FOR SHARE" if conn.dialect.name == "postgresql" else ""
    row = conn.execute(
        text(f"SELECT status, lease FROM advisor_jobs WHERE id = :id{lock}"),
        {"id": lease.job_id},
    ).first()
    if row is None or row.status != "running" or row.lease != lease.number:
        raise LeaseLost(
            f"job {lease.job_id}: lease {lease.number} was taken over; this write is dropped"
        )
