"""FSDP's step on many ranks carried from its traces on two rank counts (issue #49: a
machine's GPUs and every node count of a cluster, each one layout of the plan search).

Under ZeRO-2/3 (FSDP2) a byte a rank holds is either part of a shard, ``1/ranks`` of a whole
(the sharded parameters, gradients and optimizer state), or the same whatever the ranks (the
activations, the batch, a unit's gathered parameters, the unsharded gradients before their
reduce-scatter). Each moment of the step (after each op) then holds ``a + b / ranks`` bytes of
each holder, and the step runs the same ops on any number of ranks. So once a layout's step is
traced on two rank counts, each moment is carried along that line to any other; the peak lines
are drawn after the carry, from every moment (``peak_lines.envelope``), so a moment that only
peaks on some rank counts is not lost. The first rank count a search asks of a layout is
traced as asked (no dearer than without the carry); the next one traces the step on
``LOW_RANKS`` and is carried from it and the largest count traced, and so is every later one.
Where two traces run other ops, the step is traced on its own ranks.

What the line does not see: FSDP2 pads each parameter's rows to a multiple of the ranks
(``ceil(rows / ranks)`` a rank), so a rank holds up to one row more of each parameter and a
gathered unit up to ``ranks - 1`` rows more. ``benchmarks/replica_carry.py`` sets the peak
carried from 2 and 4 ranks (the farthest reach) beside the traced one: GPT-2 Large on 64 ranks
at most 431 KB a moment under it (its 50,257-row embedding gains 47 rows), 0.013 % of the
peak. ZeRO-1 is not carried: its largest optimizer partition holds whole tensors
(``plan_peak``), not a ``1/ranks`` share.

The traces are kept in this process (``RankTraces``: key, bound and contract in its
docstring); a user's model is traced in the isolated worker, which keeps them the same way.
"""

from __future__ import annotations

import dataclasses
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from advisor.probes.sharding import uses_fsdp

LOW_RANKS = 2  # the low end of every carry: FSDP's smallest group


def carries(replicas: int, sharding: str) -> bool:
    """Whether the step on ``replicas`` ranks under ``sharding`` goes through ``RankTraces``
    (FSDP on several ranks), not traced on its own."""
    return uses_fsdp(sharding) and replicas >= LOW_RANKS


def carried(replicas: int, low: Any, high: Any, low_ranks: int, high_ranks: int) -> Any | None:
    """The step (a ``plan_peak.PlanPeak``) on ``replicas`` ranks from the steps traced on
    ``low_ranks`` and ``high_ranks``: every moment's bytes by holder, and the optimizer state's,
    on the line in ``1 / ranks`` through the two; None when the two run other ops."""
    if len(low.timeline) != len(high.timeline):
        return None
    f = (1 / replicas - 1 / low_ranks) / (1 / high_ranks - 1 / low_ranks)

    def at(u: int, v: int) -> int:
        return max(0, round(u + (v - u) * f))

    timeline = tuple(
        tuple(at(u, v) for u, v in zip(p, q, strict=True))
        for p, q in zip(low.timeline, high.timeline, strict=True)
    )
    note = (
        f"FSDP2 over {replicas} ranks, carried from traces over {low_ranks} and {high_ranks} "
        "(shards as 1/ranks)"
    )
    notes = (*(n for n in high.notes if not n.startswith("FSDP2 over")), note)
    return dataclasses.replace(
        high, timeline=timeline, state=at(low.state, high.state), notes=notes
    )


class RankTraces:
    """The FSDP steps traced in this process, by layout (``family``: a string naming all a
    step is computed from but the ranks: workload, hyperparameters, micro-batch, plan,
    sharding, autocast rules) and rank count. A traced step never goes stale (the same key
    traces the same step), so nothing invalidates one but ``clear`` (tests); at most ``bound``
    layouts are kept, the least recently used dropped past it."""

    def __init__(self, bound: int = 32) -> None:  # GPT-3 13B at 6 blocks, ZeRO-3: 1.5 MiB a step
        self.bound = bound
        self._data: OrderedDict[str, dict[int, Any]] = OrderedDict()
        self._lock = threading.Lock()

    def step(self, family: str, replicas: int, trace: Callable[[int], Any]) -> Any:
        """The step on ``replicas`` ranks: kept; else, the layout's first, ``trace(replicas)``;
        else carried from the layout's step on ``LOW_RANKS`` (traced now when missing) and the
        largest rank count traced (or traced itself where those two run other ops)."""
        known = self._known(family)
        if replicas in known:
            return known[replicas]
        larger = [r for r in known if r > LOW_RANKS]
        if replicas == LOW_RANKS or not larger:
            return self._keep(family, replicas, trace(replicas))
        low = known.get(LOW_RANKS)
        if low is None:
            low = self._keep(family, LOW_RANKS, trace(LOW_RANKS))
        top = max(larger)
        found = carried(replicas, low, known[top], LOW_RANKS, top)
        return found if found is not None else self._keep(family, replicas, trace(replicas))

    def _known(self, family: str) -> dict[int, Any]:
        with self._lock:
            if family in self._data:
                self._data.move_to_end(family)
            return dict(self._data.get(family, {}))

    def _keep(self, family: str, ranks: int, step: Any) -> Any:
        with self._lock:
            self._data.setdefault(family, {})[ranks] = step
            self._data.move_to_end(family)
            while len(self._data) > self.bound:
                self._data.popitem(last=False)
        return step

    def clear(self) -> None:
        with self._lock:
            self._data.clear()


RANK_TRACES = RankTraces()
