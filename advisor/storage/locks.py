"""Locks shared by processes using one storage, and writes Ctrl-C cannot cut in half.

- ``storage_lock(url)``: an exclusive file lock for one storage (next to a SQLite file, else in
  ``$ADVISOR_HOME/locks``). Creating the storage's tables and a study, and choosing-and-
  claiming the next configuration of a study, happen under it, so processes started together
  neither crash on the schema (``alembic_version``) nor pick the same configuration. The lock
  is held for milliseconds (a few queries), never while a probe runs.
- ``sigint_deferred()``: Ctrl-C (or SIGTERM, under ``terminate_as_exception``) during a storage
  write is held until the write is done.
- ``owner_id()``/``owner_gone()``: this process as it signs what it holds, and whether the
  holder of a mark left on this host has exited (SIGKILL, a crash).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import signal
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

from advisor.config import home


def lock_path(url: str) -> Path | None:
    """The lock file of a storage URL (None for in-memory storages)."""
    if url.startswith("sqlite:///"):
        path = url.removeprefix("sqlite:///").split("?", 1)[0]
        if path in ("", ":memory:"):
            return None
        return Path(path + ".lock")
    digest = hashlib.sha1(url.encode()).hexdigest()[:16]
    return home() / "locks" / f"storage-{digest}.lock"


@contextlib.contextmanager
def file_lock(path: Path | None) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``path`` (no-op where flock is unavailable)."""
    try:
        import fcntl
    except ImportError:  # not POSIX: no cross-process lock; the retries still apply
        yield
        return
    if path is None:
        yield
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def storage_lock(url: str) -> contextlib.AbstractContextManager[None]:
    """The exclusive lock of one storage (see the module docstring)."""
    return file_lock(lock_path(url))


@contextlib.contextmanager
def sigint_deferred() -> Iterator[None]:
    """Hold Ctrl-C (SIGINT) until the block is done, then raise KeyboardInterrupt; likewise a
    SIGTERM that this process turns into ``Terminated`` (``advisor suggest`` does), raised
    after the block."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    from advisor.errors import Terminated

    caught: list[int] = []

    def hold(signum: int, _frame: object) -> None:
        caught.append(signum)

    previous = signal.signal(signal.SIGINT, hold)
    term = signal.getsignal(signal.SIGTERM)
    held_term = callable(term)  # a Python handler: SIGTERM is an exception here, so hold it
    if held_term:
        signal.signal(signal.SIGTERM, hold)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        if held_term:
            signal.signal(signal.SIGTERM, term)
    if signal.SIGTERM in caught:
        raise Terminated
    if caught:
        raise KeyboardInterrupt


@contextlib.contextmanager
def terminate_as_exception() -> Iterator[None]:
    """Within the block, SIGTERM raises ``advisor.errors.Terminated`` (a KeyboardInterrupt),
    so a terminated run stops as after Ctrl-C: the trial in progress is abandoned, finished
    ones are kept and reported. Only in the main thread; the previous handler is restored."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    from advisor.errors import Terminated

    def stop(_signum: int, _frame: object) -> None:
        raise Terminated

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def owner_id() -> str:
    """This process, as written into its claims."""
    return f"{socket.gethostname()}:{os.getpid()}"


def owner_gone(owner: str) -> bool:
    """Whether ``owner`` (``host:pid``, see ``owner_id``) ran on this host and has exited.
    An owner on another host is never known to be gone (its claim lapses after ``STALE_S``)."""
    host, _, pid = owner.rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)  # signal 0: does the process exist (no signal is sent)
    except ProcessLookupError:
        return True
    except PermissionError:  # it exists, under another user
        return False
    return False
