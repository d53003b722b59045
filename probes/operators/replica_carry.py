"""FSDP's step on many ranks carried from its traces on two (issue #49: a machine's GPUs and
every node count of a cluster, each one layout of the plan search).

Under ZeRO-2/3 (FSDP2) a byte a rank holds is either part of a shard, ``1/ranks`` of a whole
(the sharded parameters, gradients and optimizer state), or the same whatever the ranks (the
activations, the batch, a unit's gathered parameters, the unsharded gradients before their
reduce-scatter). Each moment of the step (after each op) then holds ``a + b / ranks`` bytes of
each holder, and the step runs the same ops on any number of ranks. So the step is traced on
``TRACED_RANKS`` ranks and each moment is carried along that line to more ranks; the peak
lines are drawn after the carry, from every moment (``peak_lines.envelope``), so a moment
that only peaks on many ranks is not lost. Where the two traces run other ops, the step is
traced on its own ranks.

What the line does not see: FSDP2 pads each parameter's rows to a multiple of the ranks
(``ceil(rows / ranks)`` a rank), so a rank holds up to one row more of each parameter and a
gathered unit up to ``ranks - 1`` rows more (GPT-3 13B's 50,257-row embedding on 64 ranks: 47
rows, 0.5 MB in bf16); ``benchmarks/replica_carry.py`` sets the carried peak beside the traced
one. ZeRO-1 is not carried: its largest optimizer partition holds whole tensors
(``plan_peak``), not a ``1/ranks`` share.

The traces on the two rank counts are kept in this process (``RankTraces``: key, bound and
contract in its docstring), so every larger count of a search reuses them; a user's model is
traced in the isolated worker, which keeps them the same way.
"""

from __future__ import annotations

import dataclasses
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from advisor.probes.sharding import uses_fsdp

TRACED_RANKS = (2, 4)  # the rank counts traced; FSDP over more ranks is carried from them


def carries(replicas: int, sharding: str) -> bool:
    """Whether the step on ``replicas`` ranks under ``sharding`` is carried, not traced."""
    return uses_fsdp(sharding) and replicas > TRACED_RANKS[1]


def carried(replicas: int, traced: Callable[[int], Any]) -> Any | None:
    """The step (a ``plan_peak.PlanPeak``) on ``replicas`` ranks from ``traced(ranks)`` on
    each of ``TRACED_RANKS``: every moment's bytes by holder, and the optimizer state's, on the
    line in ``1 / ranks`` through the two; None when the two traces run other ops."""
    r1, r2 = TRACED_RANKS
    x, y = (traced(r) for r in TRACED_RANKS)
    if len(x.timeline) != len(y.timeline):
        return None
    f = (1 / replicas - 1 / r1) / (1 / r2 - 1 / r1)

    def at(u: int, v: int) -> int:
        return max(0, round(u + (v - u) * f))

    timeline = tuple(
        tuple(at(u, v) for u, v in zip(p, q, strict=True))
        for p, q in zip(x.timeline, y.timeline, strict=True)
    )
    note = (
        f"FSDP2 over {replicas} ranks, carried from traces over {r1} and {r2} (shards as 1/ranks)"
    )
    notes = (*(n for n in y.notes if not n.startswith("FSDP2 over")), note)
    return dataclasses.replace(y, timeline=timeline, state=at(x.state, y.state), notes=notes)


class RankTraces:
    """The steps traced on ``TRACED_RANKS`` ranks in this process. Key: a string naming all a
    trace is computed from (workload, hyperparameters, micro-batch, plan, ranks, sharding,
    autocast rules); a value never goes stale (the same key traces the same step), so nothing
    invalidates it; at most ``bound`` entries, the least recently used dropped past it."""

    def __init__(self, bound: int = 64) -> None:
        self.bound = bound
        self._data: OrderedDict[str, Any] = OrderedDict()
        self._lock = threading.Lock()

    def get_or_make(self, key: str, make: Callable[[], Any]) -> Any:
        with self._lock:
            if key in self._data:
                self._data.move_to_end(key)
                return self._data[key]
        value = make()  # outside the lock: a trace takes seconds
        with self._lock:
            self._data[key] = value
            while len(self._data) > self.bound:
                self._data.popitem(last=False)
        return value

    def clear(self) -> None:
        with self._lock:
            self._data.clear()


RANK_TRACES = RankTraces()
