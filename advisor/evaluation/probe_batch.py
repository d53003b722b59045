"""Issue #28: the local probes a screen needs, taken in one child process.

The screen of ``advisor suggest`` probes this machine once per batch size (and once more for
the epochs model's reference, when it needs one). Started one at a time, each probe paid the
interpreter and framework start-up again; ``prefetch`` takes the ones not cached in one
process, smallest batch first (``advisor.probes.runner.run_probes``: the later probes count
the measured start-up in their initialisation and say they shared the process), caching each
result as it arrives, under the same per-key locks a single probe takes.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from advisor.evaluation.probe_cache import probe_cache_key
from advisor.evaluation.probe_slot import probe_key_lock, probe_slot
from advisor.evaluation.workload import WorkloadInfo
from advisor.probes.result import ProbeResult


def prefetch(backend: Any, workload: WorkloadInfo, batch_sizes: Sequence[int]) -> None:
    """Run ``backend``'s (a ``LocalBackend``) missing probes for ``batch_sizes`` in one process (see above); an
    injected ``run_probe`` (tests) keeps probing one at a time."""
    self = backend
    if self._run_probe is not None:
        return
    anchor = workload.epochs_anchor() if workload.needs_noise_scale() else None
    wanted = {(b, anchor is not None and anchor.batch_size == b) for b in batch_sizes}
    if anchor is not None:
        wanted.add((anchor.batch_size, True))
    keys = {
        pair: probe_cache_key(workload, pair[0], self.threads, self.iterations, {}, pair[1])
        for pair in sorted(wanted)
    }
    # issue #34: a probe too big or too slow for this machine is not run (its stand-in is
    # traced when the screen asks for it); issue #50: deciding it traces the step, minutes
    # for a big model, so each batch size is told
    missing = []
    for i, (p, k) in enumerate(keys.items()):
        if self._on_probe is not None:
            what = f"{workload.name} at batch {p[0]} (its step traced on the meta device)"
            self._on_probe(f"deciding whether this machine can time {what}", i, len(keys))
        if _missing(self, k) and self.stand_ins.probeable(workload, p[0], {}):
            missing.append(p)
    # issue #36: the first answer (``run_suggest``'s ``before_probes``), once, before any
    # probe is timed; never when every probe is cached
    hook = self.settings.before_probes
    if missing and hook is not None:
        self.settings = replace(self.settings, before_probes=None)
        hook()
    if len(missing) < 2:  # one probe: ``LocalBackend.probe`` takes it; a busy machine's probe
        # judged retakable here is left to it to retake (issue #36: it was marked judged and
        # then reused, so a single contended probe was never retaken)
        for pair in missing:
            self.retakes.defer(keys[pair])
        return
    judged = {p: self.cache.get(keys[p], since=self.started_at) for p in missing}
    with contextlib.ExitStack() as held:  # the same locks as one probe takes, in key order
        for key in sorted(keys[p] for p in missing):
            held.enter_context(probe_key_lock(key))
        # still missing, or still the busy machine's probe judged to retake (issue #36: asking
        # ``Retakes.due`` again here heard "judged already" and dropped every retake); one another
        # process took meanwhile is used
        missing = [
            p for p in missing if self.cache.get(keys[p], since=self.started_at) == judged[p]
        ]
        requests = [self._request(workload, b, {}, noise) for b, noise in missing]

        def started(i: int) -> None:
            if self._on_probe is not None:
                self._on_probe(
                    f"probing {workload.name} at batch {missing[i][0]} on this machine "
                    f"({i + 1} of {len(missing)}, one process)",
                    i,
                    len(missing),
                )

        def done(i: int, result: ProbeResult) -> None:
            self.cache.put(keys[missing[i]], result)
            self._fresh.add(keys[missing[i]])
            self.retakes.taken(keys[missing[i]])  # taken now: not judged again this run

        import time

        from advisor.probes.runner import run_probes

        deadline = None  # issue #36: --timeout bounds the batch, not each probe in turn
        if self.deadline is not None:
            deadline = time.time() + (self.deadline - time.monotonic())
        with probe_slot():  # one timing probe at a time on this host, only while they run
            run_probes(requests, on_start=started, on_result=done, deadline=deadline,
                       excuse_cpu_wait=True)  # fmt: skip


def _missing(backend: Any, key: str) -> bool:
    """Not cached, or cached from a busy machine that is quiet now (retaken, once per run)."""
    cached = backend.cache.get(key, since=backend.started_at)
    return cached is None or backend.retakes.due(key, cached)
