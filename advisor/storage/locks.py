"""Locks shared by processes using one storage, and writes Ctrl-C cannot cut in half.

- ``storage_lock(url)``: an exclusive file lock for one storage (next to a SQLite file, else in
  ``$ADVISOR_HOME/locks``). Creating the storage's tables and a study, and choosing-and-
  claiming the next configuration of a study, happen under it, so processes started together
  neither crash on the schema (``alembic_version``) nor pick the same configuration. The lock
  is held for milliseconds (a few queries), never while a probe runs, and only by a live
  process (a ``live_lock``: CI saw a worker stopped inside it hold up the host's others).
- ``sigint_deferred()``: Ctrl-C (or SIGTERM, under ``terminate_as_exception``) during a storage
  write is held until the write is done.
- ``owner_id()``/``owner_gone()``: this process as it signs what it holds, and whether the
  holder of a mark left on this host has exited (SIGKILL, a crash).
- ``live_lock(path)``: an exclusive lock that only a live holder keeps (this host's probe
  locks, ``advisor.evaluation.probe_slot``); see its docstring.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import signal
import socket
import threading
import time
from collections.abc import Callable, Iterator
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


STOPPED_S = 1.0  # a holder stopped this long is passed (a probe's own pauses are far shorter)
POLL_S = 0.1  # how often a waiter for a live lock looks again


@contextlib.contextmanager
def live_lock(
    path: Path, on_wait: Callable[[bool], None] | None = None, stopped_s: float = STOPPED_S
) -> Iterator[bool]:
    """Hold an exclusive ``flock`` on ``path`` that only a live holder keeps; yields True when
    held, False when this process went ahead past a stopped holder.

    Why: a plain ``flock`` outlives its holder's usefulness when the holder is paused
    (SIGSTOP, Ctrl-Z, a debugger): the kernel frees the lock of a process that exits, never
    of one that is stopped, and everything behind it waits for as long as the pause lasts --
    for good if it never resumes (issue #50: a service job re-run on the same host waited on
    its own paused worker's per-configuration probe lock, its lease renewed all the while).
    So the holder writes its process id and host into the file, and a waiter polls (every
    ``POLL_S``) instead of blocking: when the recorded holder is a process of this host that
    has been stopped (state T or t) for ``stopped_s``, the waiter goes ahead without the lock.
    A stopped process uses no CPU and writes nothing, so passing it disturbs no timing; a
    holder that resumes finds its work done or, in the service, its lease taken over (every
    write is fenced). A heartbeat the holder renews was not chosen: on a loaded machine (load
    13-20 on two cores in the fault runs) a live holder's heartbeat thread can miss its bound,
    while the process state is exact and costs the holder nothing. A holder on another host
    (a shared home) is never judged and is waited for.

    ``on_wait(True)`` is called when the wait starts and ``on_wait(False)`` once this process
    holds the lock or goes ahead (it may raise to give up): a service job's lease keeper
    renews nothing for a job that waits too long (``advisor.service.runner.LeaseKeeper``),
    since waiting alone is not progress. Where ``flock`` is unavailable it yields True at once.
    """
    try:
        import fcntl
    except ImportError:  # not POSIX: no cross-process lock
        yield True
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    held = told = False
    stopped_since: float | None = None
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                held = True
                break
            except BlockingIOError:
                pass
            if not told and on_wait is not None:
                on_wait(True)
            told = True
            pid = lock_holder(path)
            if pid is not None and process_stopped(pid):
                stopped_since = stopped_since or time.monotonic()
                if time.monotonic() - stopped_since >= stopped_s:
                    import logging

                    logging.getLogger("advisor").warning(
                        "the holder of %s (process %d) is stopped; going on without it",
                        path.name,
                        pid,
                    )
                    break
            else:
                stopped_since = None
            time.sleep(POLL_S)
        if held:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n{socket.gethostname()}\n".encode(), 0)
        if told and on_wait is not None:
            on_wait(False)
        yield held
    finally:
        if held:
            fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def lock_holder(path: Path) -> int | None:
    """The process id a ``live_lock``'s last holder wrote, when it ran on this host (None:
    never held, unreadable, or another host's)."""
    try:
        lines = path.read_text().split()
    except (OSError, UnicodeDecodeError):
        return None
    if not lines or not lines[0].isdigit() or lines[1:2] not in ([], [socket.gethostname()]):
        return None
    return int(lines[0])


def process_stopped(pid: int) -> bool:
    """Whether process ``pid`` of this host is stopped (SIGSTOP, Ctrl-Z, a tracer: state T or
    t in ``/proc``); False where that cannot be read."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[:1] in (["T"], ["t"])


@contextlib.contextmanager
def storage_lock(url: str | None) -> Iterator[None]:
    """The exclusive lock of one storage (see the module docstring; none for ``None`` or an
    in-memory storage). A ``live_lock``: a process stopped while it holds the lock (SIGSTOP
    mid-claim) holds up the other processes of its host for ``STOPPED_S``, not for as long as
    the pause lasts; resumed, its writes are fenced (service) or at worst repeat a probe."""
    path = lock_path(url) if url else None
    if path is None:
        yield
        return
    with live_lock(path):
        yield


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
