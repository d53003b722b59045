"""This host's probe locks: one timing probe at a time per host (the slot,
``$ADVISOR_HOME/local-probes.lock``: ``probe_slot``), and one probe per configuration
(``probe_key_lock``: two timing probes of one configuration never run at once on this host;
the second reads the first's result).

A probe times the CPU, so two probes on one host would slow each other down. The slot is
held only while a probe runs -- never for a whole study or job, so a job that is choosing,
writing or waiting for its database holds nobody up; a configuration's lock is held while its
probe is looked up, waited for and taken.

Both are ``advisor.storage.locks.live_lock``s: only a live holder keeps them. A waiter polls;
when the holder is stopped (SIGSTOP, Ctrl-Z: state ``T``) for ``STOPPED_S``, the waiter goes
ahead without the lock: a stopped process uses no CPU, so it disturbs no timing, and a job it
ran has lost its lease by then. (Two waiters may then go ahead together; a holder that
resumes finds its lease taken over and writes nothing.) Issue #50: the configuration's lock
was a plain ``flock``, so a job re-run on the same host waited on its own paused worker's
lock for as long as the pause lasted.

Each wait is told to the thread's listener (``on_wait``): the service's lease keeper renews
nothing for a job that waits too long, since a job that waits is not progressing.
"""

from __future__ import annotations

import contextlib
import hashlib
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

from advisor.storage.locks import STOPPED_S, live_lock, lock_holder

__all__ = ["STOPPED_S", "holder", "key_lock_path", "on_wait", "probe_key_lock", "probe_slot"]

SLOT_FILE = "local-probes.lock"
_listener = threading.local()


@contextlib.contextmanager
def on_wait(listener: Callable[[bool], None]) -> Iterator[None]:
    """While inside, ``listener(True)`` when this thread starts waiting for one of this host's
    probe locks and ``listener(False)`` once it holds it (it may raise to give the probe up)."""
    previous = getattr(_listener, "fn", None)
    _listener.fn = listener
    try:
        yield
    finally:
        _listener.fn = previous


def _tell(waiting: bool) -> None:
    fn = getattr(_listener, "fn", None)
    if fn is not None:
        fn(waiting)


def key_lock_path(key: str) -> Path:
    """The lock file of one probe key, whatever the storage."""
    from advisor.config import home

    return home() / "locks" / f"probe-{hashlib.sha1(key.encode()).hexdigest()[:16]}.lock"


def slot_path() -> Path:
    """The slot's lock file."""
    from advisor.config import home

    return home() / SLOT_FILE


def holder(path: Path | None = None) -> int | None:
    """The process id of the slot's (or ``path``'s) last holder on this host (None: never
    held, or unreadable)."""
    return lock_holder(path or slot_path())


@contextlib.contextmanager
def probe_slot() -> Iterator[None]:
    """Hold this host's probe slot while inside (see the module docstring)."""
    with live_lock(slot_path(), _tell):
        yield


@contextlib.contextmanager
def probe_key_lock(key: str) -> Iterator[None]:
    """Hold the lock of probe ``key`` on this host while inside (see the module docstring)."""
    with live_lock(key_lock_path(key), _tell):
        yield
