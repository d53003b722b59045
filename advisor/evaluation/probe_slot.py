"""This host's probe locks: one timing probe at a time per host (the slot,
``$ADVISOR_HOME/local-probes.lock``), and one probe per configuration (``key_lock_path``).

A probe times the CPU, so two probes on one host would slow each other down. The slot is an
exclusive ``flock`` held only while a probe runs -- never for a whole study or job, so a job
that is choosing, writing or waiting for its database holds nobody up. The holder writes its
process id into the file.

A waiter polls the slot. Its thread's listener (``on_wait``) hears when it starts and stops
waiting: the service's lease keeper renews nothing meanwhile, since a job that waits is not
progressing. When the holder is stopped (SIGSTOP, a frozen container: state ``T``) for
``STOPPED_S``, the waiter goes ahead without the slot: a stopped process uses no CPU, so it
disturbs no timing, and a job it ran has lost its lease by then. (Two waiters may then go
ahead together; a holder that resumes finds its lease taken over and writes nothing.)
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

SLOT_FILE = "local-probes.lock"
POLL_S = 0.1
STOPPED_S = 1.0
log = logging.getLogger("advisor")
_listener = threading.local()


@contextlib.contextmanager
def on_wait(listener: Callable[[bool], None]) -> Iterator[None]:
    """While inside, ``listener(True)`` when this thread starts waiting for the slot and
    ``listener(False)`` once it holds it (it may raise to give the probe up)."""
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
    """The lock of one probe key, whatever the storage: two timing probes of one
    configuration never run at once on this machine (the second reads the first's result)."""
    import hashlib

    from advisor.config import home

    return home() / "locks" / f"probe-{hashlib.sha1(key.encode()).hexdigest()[:16]}.lock"


def slot_path() -> Path:
    """The slot's lock file."""
    from advisor.config import home

    return home() / SLOT_FILE


def holder(path: Path | None = None) -> int | None:
    """The process id the slot's last holder wrote (None: never held, or unreadable)."""
    try:
        text = (path or slot_path()).read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def is_stopped(pid: int) -> bool:
    """Whether process ``pid`` is stopped (SIGSTOP); False where that cannot be read."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[:1] in (["T"], ["t"])


@contextlib.contextmanager
def probe_slot() -> Iterator[None]:
    """Hold this host's probe slot while inside (see the module docstring)."""
    try:
        import fcntl
    except ImportError:  # not POSIX: no cross-process lock
        yield
        return
    path = slot_path()
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
            if not told:
                told = True
                _tell(True)
            pid = holder(path)
            if pid is not None and is_stopped(pid):
                stopped_since = stopped_since or time.monotonic()
                if time.monotonic() - stopped_since >= STOPPED_S:
                    log.warning("the probe slot's holder (process %d) is stopped; going on", pid)
                    break
            else:
                stopped_since = None
            time.sleep(POLL_S)
        if held:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        if told:
            _tell(False)
        yield
    finally:
        if held:
            fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
