"""Several ``advisor suggest`` processes on one study: locks, claims, and Ctrl-C-safe writes.

- ``storage_lock(url)``: an exclusive file lock for one storage (next to a SQLite file, else in
  ``$ADVISOR_HOME/locks``). Creating the storage's tables and the study, and choosing-and-
  claiming the next configuration, happen under it, so processes started together neither
  crash on the schema (``alembic_version``) nor pick the same configuration. The lock is held
  for milliseconds (a few queries), never while a probe runs.
- ``Claims``: which (machine, batch) another process is evaluating right now. A claim is a
  study system attribute ``claim:<machine>|<batch>`` (one row, one commit) holding the owner,
  the time and the probe cost reserved. A claim whose owner ran on this host and no longer
  exists is ignored at once (SIGKILL, a crash); one from another host once it is older than
  ``STALE_S`` (a power cut there); so is the claim of a configuration whose trial is written.
  Claims are attributes rather than RUNNING trials because the loop writes each finished
  trial in one transaction (``add_trial``), so a trial is never half-written.
- ``sigint_deferred()``: Ctrl-C during a storage write is held until the write is done.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import signal
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from advisor.config import home

CLAIM_PREFIX = "claim:"
PEER_PREFIX = "peer:"
HEARTBEAT_S = 60.0  # how often a process refreshes its presence mark
STALE_S = 900.0  # a probe is time-boxed (120 s timeout); a claim this old was abandoned


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
    """Hold Ctrl-C (SIGINT) until the block is done, then raise KeyboardInterrupt."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, _frame: caught.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if caught:
        raise KeyboardInterrupt


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


class Claims:
    """Claims of (machine, batch) configurations in one study, and who else is at work on it
    (see the module docstring).

    A claim is left in place once its trial is written (the trial, now done, overrides it:
    one commit per trial, not two); it is cleared when the evaluation did not end in a
    written trial (Ctrl-C, an exception). Each process also keeps a presence mark
    ``peer:<owner>`` (refreshed every ``HEARTBEAT_S``, marked ended on exit), so that a
    process alone on a study skips re-reading the trials: it re-reads them only when another
    process is at work or has been since its last read.
    """

    def __init__(self, storage: Any, study_id: int) -> None:
        self._storage = storage
        self._study_id = study_id
        self.owner = owner_id()
        self._said_hello = 0.0
        self.peers_seen_at = 0.0  # the latest mark of another process, as last read

    @staticmethod
    def _key(config: tuple[str, int]) -> str:
        return f"{CLAIM_PREFIX}{config[0]}|{config[1]}"

    def hello(self, ended: bool = False) -> None:
        """Write (or refresh) this process's presence mark; ``ended`` on the way out."""
        now = time.time()
        self._said_hello = now
        value = {"at": now, "ended": ended}
        self._storage.set_study_system_attr(self._study_id, PEER_PREFIX + self.owner, value)

    def others(self) -> dict[tuple[str, int], float]:
        """Configurations other live processes are evaluating -> the probe cost reserved;
        also updates ``peers_seen_at`` and this process's own mark when it is due."""
        if time.time() - self._said_hello > HEARTBEAT_S:
            self.hello()
        out: dict[tuple[str, int], float] = {}
        now = time.time()
        latest = 0.0
        for key, value in self._storage.get_study_system_attrs(self._study_id).items():
            if not isinstance(value, dict) or value.get("owner", key) == self.owner:
                continue
            at = float(value.get("at", 0))
            if key.startswith(PEER_PREFIX) and key != PEER_PREFIX + self.owner:
                live = not value.get("ended") and now - at <= 3 * HEARTBEAT_S
                latest = max(latest, now if live else at)
            elif (
                key.startswith(CLAIM_PREFIX)
                and now - at <= STALE_S
                and not owner_gone(str(value.get("owner", "")))
            ):
                machine, _, batch = key.removeprefix(CLAIM_PREFIX).rpartition("|")
                out[(machine, int(batch))] = float(value.get("probe_usd", 0.0))
                latest = max(latest, at)
        self.peers_seen_at = latest
        return out

    def claim(self, config: tuple[str, int], probe_usd: float) -> None:
        value = {"owner": self.owner, "at": time.time(), "probe_usd": probe_usd}
        self._storage.set_study_system_attr(self._study_id, self._key(config), value)

    def release(self, config: tuple[str, int]) -> None:
        self._storage.set_study_system_attr(self._study_id, self._key(config), None)
