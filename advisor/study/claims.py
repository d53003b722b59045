"""Several ``advisor suggest`` processes on one study: who is evaluating which configuration.

A claim is a study system attribute ``claim:<machine>|<batch>`` (one row, one commit) holding
the owner, the time and the probe cost reserved. A claim whose owner ran on this host and no
longer exists is ignored at once (SIGKILL, a crash); one from another host once it is older
than ``STALE_S`` (a power cut there); so is the claim of a configuration whose trial is
written. Claims are attributes rather than RUNNING trials because the loop writes each
finished trial in one transaction (``add_trial``), so a trial is never half-written. The
choice and the claim happen under the storage's lock (``advisor.storage.locks``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Protocol

from advisor.storage.locks import owner_gone, owner_id

CLAIM_PREFIX = "claim:"
PEER_PREFIX = "peer:"
HEARTBEAT_S = 60.0  # how often a process refreshes its presence mark
STALE_S = 900.0  # a probe is time-boxed (120 s timeout); a claim this old was abandoned


class ClaimStore(Protocol):
    """What the trial loop needs from a claims store (``advisor.study.loop.TrialLoop`` takes
    one; ``Claims`` is the default, the service's workers on several hosts inject one the
    database enforces: ``advisor.service.trials.TableClaims``)."""

    peers_seen_at: float
    clock: Callable[[], float]  # the wall clock its marks are written and read on

    def hello(self, ended: bool = False) -> None: ...

    def others(self) -> dict[tuple[str, int], float]: ...

    def claim(self, config: tuple[str, int], probe_usd: float) -> bool: ...

    def release(self, config: tuple[str, int]) -> None: ...

    def done(self, config: tuple[str, int]) -> None: ...


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

    def __init__(self, storage: Any, study_id: int, clock: Callable[[], float] = time.time) -> None:
        self._storage = storage
        self.clock = clock  # wall-clock seconds: the marks are compared across processes
        self._study_id = study_id
        self.owner = owner_id()
        self._said_hello = 0.0
        self.peers_seen_at = 0.0  # the latest mark of another process, as last read

    @staticmethod
    def _key(config: tuple[str, int]) -> str:
        return f"{CLAIM_PREFIX}{config[0]}|{config[1]}"

    def hello(self, ended: bool = False) -> None:
        """Write (or refresh) this process's presence mark; ``ended`` on the way out."""
        now = self.clock()
        self._said_hello = now
        value = {"at": now, "ended": ended}
        self._storage.set_study_system_attr(self._study_id, PEER_PREFIX + self.owner, value)

    def others(self) -> dict[tuple[str, int], float]:
        """Configurations other live processes are evaluating -> the probe cost reserved;
        also updates ``peers_seen_at`` and this process's own mark when it is due."""
        if self.clock() - self._said_hello > HEARTBEAT_S:
            self.hello()
        out: dict[tuple[str, int], float] = {}
        now = self.clock()
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

    def claim(self, config: tuple[str, int], probe_usd: float) -> bool:
        """Claim ``config`` (always granted: the caller chose it under the storage lock)."""
        value = {"owner": self.owner, "at": self.clock(), "probe_usd": probe_usd}
        self._storage.set_study_system_attr(self._study_id, self._key(config), value)
        return True

    def release(self, config: tuple[str, int]) -> None:
        self._storage.set_study_system_attr(self._study_id, self._key(config), None)

    def done(self, config: tuple[str, int]) -> None:
        """``config``'s trial is written: nothing to do (the trial overrides the claim)."""
