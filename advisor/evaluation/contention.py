"""Local probes timed while other processes kept the CPU busy (issue #28).

Every probe measures how many cores the rest of the machine kept busy while its steps were
timed (``fingerprint["contention"]["others_cores"]``: the machine's busy CPU time from
``/proc/stat`` less the probe's own, per second; ``advisor.probes.framework``). A probe whose
neighbours used at least ``BUSY_SHARE`` of the cores (and at least half a core) shared the CPU
with them: its steps may be slower than this machine runs them alone, by up to
cores / (cores - others) when they took their fair share. Such a probe is

- flagged in the report (``notes``: one line, which batch sizes, how busy, how much slower
  at most);
- retaken on a later run when the machine is quiet then (``quiet_now``), instead of being
  reused from the cache: the cache keeps the best measurement this machine has given.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

BUSY_SHARE = 0.25  # others using this share of the cores (and at least half a core): contended
QUIET_CORES = 0.25  # others using less than this many cores: quiet enough to retake a probe
QUIET_WINDOW_S = 0.3  # how long "quiet now" watches the machine


def contention(probe: Any) -> dict[str, float] | None:
    """The probe's measured contention {"others_cores", "cores"} when it was contended,
    else None (not contended, or not measured: an older probe, another OS)."""
    fingerprint = getattr(probe, "fingerprint", None)
    if fingerprint is None and isinstance(probe, dict):
        fingerprint = probe.get("fingerprint")
    found = (fingerprint or {}).get("contention") or {}
    others, cores = found.get("others_cores"), found.get("cores")
    if others is None or not cores:
        return None
    if others >= max(0.5, BUSY_SHARE * cores):
        return {"others_cores": float(others), "cores": float(cores)}
    return None


def slowdown_bound(found: dict[str, float]) -> float:
    """How much slower a contended probe's steps may be: cores / (cores - others) (capped)."""
    free = max(found["cores"] - found["others_cores"], found["cores"] / 10)
    return found["cores"] / free


def notes(probes: Iterable[tuple[int, Any]]) -> list[str]:
    """One line naming the contended probes (batch sizes, how busy, the bound on their
    slowdown), or none when no probe was contended."""
    found = {}
    for batch, probe in sorted(probes, key=lambda bp: bp[0]):
        busy = contention(probe)
        if busy is not None and batch not in found:
            found[batch] = busy
    if not found:
        return []
    batches = ", ".join(str(b) for b in found)
    others = [f["others_cores"] for f in found.values()]
    low, high = min(others), max(others)
    busy_text = f"{low:.1f}" if f"{low:.1f}" == f"{high:.1f}" else f"{low:.1f}-{high:.1f}"
    cores = max(f["cores"] for f in found.values())
    worst = max(slowdown_bound(f) for f in found.values())
    which = "probe at batch" if len(found) == 1 else "probes at batch sizes"
    return [
        f"The {which} {batches} shared the CPU ({busy_text} of {cores:.0f} cores busy "
        f"elsewhere): times modelled from them may be up to {worst:.1f}x too slow; re-run "
        "when quiet and they are then retaken."
    ]


def quiet_now(window_s: float = QUIET_WINDOW_S) -> bool:
    """Whether the rest of the machine is nearly idle now (others below ``QUIET_CORES``
    cores over ``window_s``); False where it cannot be told."""
    from advisor.probes.host import busy_cpu_s, others_cores

    before, cpu, wall = busy_cpu_s(), time.process_time(), time.perf_counter()
    time.sleep(window_s)
    others = others_cores(
        before, busy_cpu_s(), time.process_time() - cpu, time.perf_counter() - wall
    )
    return others is not None and others < QUIET_CORES


class Retakes:
    """Which cached busy-machine probes this run retakes: each judged once per run, retaken
    when the machine is quiet then (``quiet_now``). Issue #36: a probe judged to retake is
    retaken, also when ``prefetch`` leaves it to a single probe (``defer``)."""

    def __init__(self) -> None:
        self.judged: set[str] = set()  # keys judged (or taken) this run
        self.deferred: set[str] = set()  # judged to retake, left to ``LocalBackend.probe``

    def due(self, key: str, cached: Any) -> bool:
        """Whether to retake the cached probe under ``key`` now (judged once per run)."""
        if key in self.deferred:
            self.deferred.discard(key)
            return True
        if key in self.judged or contention(cached) is None:
            return False
        self.judged.add(key)
        return quiet_now()

    def taken(self, key: str) -> None:
        """The probe under ``key`` was taken this run: not judged again."""
        self.judged.add(key)

    def defer(self, key: str) -> None:
        """``key`` was judged to retake but is not taken yet: the next ``due`` says so."""
        if key in self.judged:
            self.deferred.add(key)


def steady_spread(probe: Any) -> float | None:
    """The relative spread (max / min - 1) of a probe's last three steady iterations (the
    first is warm-up): the probe stops once they agree within 5 % on a quiet machine and
    keeps measuring when disturbed, so this is the noise its timings carry (issue #36: the
    tie band). None for a failed or untimed probe, or fewer than four iterations."""
    if isinstance(probe, dict):
        status, times = probe.get("status"), probe.get("iteration_s") or ()
        fingerprint = probe.get("fingerprint") or {}
    else:
        status, times = getattr(probe, "status", None), getattr(probe, "iteration_s", ())
        fingerprint = getattr(probe, "fingerprint", None) or {}
    if status != "ok" or len(times) < 4 or "untimed" in fingerprint:
        return None
    last = [float(t) for t in times[1:][-3:]]
    if min(last) <= 0:
        return None
    return max(last) / min(last) - 1.0


def tie_band(probes: Iterable[tuple[int, Any]]) -> dict[str, Any]:
    """The band of a report's deciding metric (issue #36: the cost among the fastest, or the
    time among the cheapest) from its probes (batch size, probe): the quiet band, or the busy
    machine's when any timed probe was contended (``advisor.evaluation.ranking.
    contention_band``), with what it rests on. The spread of each probe's last three steady
    iterations (``steady_spread``) is reported beside it: it says how noisy the timings were,
    but the band does not follow it (a measured band moved between runs by more than the rows
    did). The objective's own band ends in the front's widest gap (``ranking.band_limit``)."""
    from advisor.evaluation.ranking import contention_band

    spreads: dict[int, float] = {}
    busy: dict[int, dict[str, float]] = {}
    timed: set[int] = set()
    for batch, probe in sorted(probes, key=lambda bp: bp[0]):
        if _timed(probe):
            timed.add(batch)
        spread = steady_spread(probe)
        if spread is not None and batch not in spreads:
            spreads[batch] = spread
        found = contention(probe)
        if found is not None and batch not in busy:
            busy[batch] = found
    share = contention_band(bool(busy))
    if busy:
        which = ", ".join(f"b{b}" for b in busy)
        basis = (
            f"{share:.0%} on the deciding metric: the probes at {which} shared the CPU with "
            "other processes (their times move between runs); the quiet band is 5 %"
        )
    elif timed:
        basis = f"{share:.0%} on the deciding metric: every probe had the CPU to itself"
    else:
        basis = f"{share:.0%} on the deciding metric: no probe timed here"
    return {
        "share": share,
        "contended": sorted(busy),
        "spreads": {str(b): round(s, 4) for b, s in spreads.items()},
        "basis": basis,
    }


def _timed(probe: Any) -> bool:
    """Whether ``probe`` is an ok probe timed here (not a stand-in traced without a timing)."""
    if isinstance(probe, dict):
        status, fingerprint = probe.get("status"), probe.get("fingerprint") or {}
    else:
        status = getattr(probe, "status", None)
        fingerprint = getattr(probe, "fingerprint", None) or {}
    return status == "ok" and "untimed" not in fingerprint
