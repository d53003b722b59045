"""Telling a dependency's outage from a bug, saying so without addresses, and backing off.

A storage error (PostgreSQL restarting or unreachable, a full disk under SQLite) or a queue
error (Redis down) is transient: a request gets 503 with ``Retry-After``, a job retries with
backoff. The text shown for one never carries the database's host, port, user or SQL: the
drivers' own messages do ("connection to server at "10.0.0.5", port 5432 failed").
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterator
from typing import TypeVar

T = TypeVar("T")


def _chain(exc: BaseException | None) -> Iterator[BaseException]:
    seen = 0
    while exc is not None and seen < 20:
        yield exc
        exc = exc.__cause__ or exc.__context__
        seen += 1


def _storage_types() -> tuple[type[BaseException], ...]:
    import sqlite3

    from optuna.exceptions import StorageInternalError
    from sqlalchemy.exc import SQLAlchemyError

    types: list[type[BaseException]] = [SQLAlchemyError, StorageInternalError, sqlite3.Error]
    try:
        import psycopg

        types.append(psycopg.Error)
    except ImportError:
        pass
    return tuple(types)


def is_storage_error(exc: BaseException | None) -> bool:
    """Whether ``exc`` (or one it came from) is the database failing, not the request."""
    types = _storage_types()
    return any(isinstance(e, types) for e in _chain(exc))


def is_queue_error(exc: BaseException | None) -> bool:
    """Whether ``exc`` (or one it came from) is the Redis queue unreachable."""
    try:
        from redis.exceptions import ConnectionError, TimeoutError
    except ImportError:
        return False
    return any(isinstance(e, ConnectionError | TimeoutError) for e in _chain(exc))


def describe(exc: BaseException) -> str:
    """What failed, in words that name no host, port, user or statement."""
    texts = " ".join(str(e) for e in _chain(exc)).lower()
    if "disk is full" in texts or "no space left" in texts:
        return "the study storage's disk is full"
    if is_queue_error(exc):
        return "the job queue (Redis) is unreachable"
    if any(
        word in texts
        for word in ("connection", "connect", "server closed", "terminating", "shutting down")
    ):
        return "the study storage (database) is unreachable or restarting"
    first = next((e for e in _chain(exc) if is_storage_error(e)), exc)
    return f"the study storage failed ({type(first).__name__})"


def backoff(first_s: float = 0.5, cap_s: float = 15.0) -> Iterator[float]:
    """Delays growing 2x from ``first_s`` up to ``cap_s``, each with +-25 % jitter."""
    delay = first_s
    while True:
        yield delay * random.uniform(0.75, 1.25)
        delay = min(cap_s, delay * 2)


def retry_transient(
    call: Callable[[], T],
    budget_s: float,
    transient: Callable[[BaseException], bool] = is_storage_error,
    on_retry: Callable[[BaseException, float], None] | None = None,
) -> T:
    """``call()``, retried with backoff while it fails transiently and ``budget_s`` lasts;
    the last error is raised when it runs out."""
    end = time.monotonic() + budget_s
    for delay in backoff():
        try:
            return call()
        except Exception as exc:
            if not transient(exc) or time.monotonic() + delay > end:
                raise
            if on_retry is not None:
                on_retry(exc, delay)
            time.sleep(delay)
    raise AssertionError("unreachable")
