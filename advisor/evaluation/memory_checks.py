"""Issue #34: what the scorer of ``advisor suggest`` does with memory, before and after a probe.

- Before a local probe: ``StandIns`` traces the step on the meta device and asks the host-RAM
  check (``evaluation.untimed.decide``, which reads the one memory model) whether a probe fits
  this machine; a model too big or too slow is never probed here: it gets the stand-in probe
  ``advisor predict`` uses (``evaluation.untimed.untimed_probe``), and its GPU rows are
  predicted from the trace. This machine's own row then says why it was not probed.
- The batch limit: ``BatchLimits`` computes, once per machine type and trace, the largest batch
  of the search whose step fits the machine's devices (``memory.device.batch_limit``);
  larger batches on it are not predicted at all.
- A row that does not fit is a ``RunTime`` without a run time, whose error is the memory
  model's "does not fit: needs X GiB per GPU, has Y": the screen scores it as failed, so it is
  never ranked, recommended, tried or probed in the cloud, and it charges nothing (without a
  screen, a trial that draws it is written as failed with that reason: no probe runs).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from advisor.evaluation.contract import RunTime
from advisor.evaluation.workload import WorkloadInfo
from advisor.prediction.memory.device import (
    DeviceMemory,
    batch_limit,
    capacity_bytes,
    machine_memory,
)
from advisor.probes.result import ProbeResult
from advisor.providers.catalog import InstanceType

DOES_NOT_FIT = "does not fit"  # how a does-not-fit error starts (the memory model's text)
# A does-not-fit row of the screen's first pass: its plain plans do not fit, the others were
# not traced (``advisor.study.screen``)
UNSEARCHED = "plans_not_searched"
# suggest skips a local probe for time only when even the step's lower bound (its FLOPs at this
# CPU's measured product rate) is over a minute: the probe's own time box (120 s) could not
# take its five-step floor. A tighter limit moved with the machine's load: fcn at batch 2048
# came out at "at least 6 s a step" on a busy 2-core machine and lost its row.
SUGGEST_MAX_STEP_S = 60.0


class StandIns:
    """Whether this machine can probe (workload, batch, hyperparameters), decided once each
    before any probe runs, and the stand-in probe of one it cannot."""

    def __init__(self) -> None:
        self._decisions: dict[tuple[str, int, str], Any] = {}

    def decision(self, workload: WorkloadInfo, batch: int, rt_hps: dict[str, Any]) -> Any:
        """The ``untimed.LocalDecision`` (None: the step could not be traced; probe it)."""
        from advisor.evaluation.untimed import decide

        key = (workload.name, batch, json.dumps(rt_hps, sort_keys=True))
        if key not in self._decisions:
            self._decisions[key] = decide(
                workload.name, batch, workload.framework, rt_hps, SUGGEST_MAX_STEP_S
            )
        return self._decisions[key]

    def probeable(self, workload: WorkloadInfo, batch: int, rt_hps: dict[str, Any]) -> bool:
        """Whether a local probe of it fits this machine (memory and time)."""
        found = self.decision(workload, batch, rt_hps)
        return found is None or bool(found.feasible)

    def stand_in(
        self, workload: WorkloadInfo, batch: int, rt_hps: dict[str, Any]
    ) -> ProbeResult | None:
        """The probe traced without a local timing, or None when a probe can run here."""
        from advisor.evaluation.untimed import untimed_probe

        found = self.decision(workload, batch, rt_hps)
        if found is None or found.feasible:
            return None
        return untimed_probe(
            workload.name, batch, found, workload.framework, rt_hps or None,
            n_train=workload.n_train, n_val=workload.n_val,
        )  # fmt: skip


def not_probed_here(probe: ProbeResult, epochs: int, new: bool) -> RunTime | None:
    """This machine's row when its probe is a stand-in: not probed here, and why (None for a
    timed probe)."""
    from advisor.prediction.step.ready import UNTIMED_KEY

    why = probe.fingerprint.get(UNTIMED_KEY)
    if not why:
        return None
    from advisor.probes.operators.feasibility import RAM_WORDS

    memory = RAM_WORDS in str(why)  # the host-RAM check's words
    head = f"{DOES_NOT_FIT} on this machine, not probed here" if memory else "not probed here"
    return RunTime(
        None, "modelled", epochs, 0.0, probe=probe, new_probe=new, error=f"{head}: {why}"
    )


def does_not_fit(
    memory: DeviceMemory, epochs: int, probe: ProbeResult, new: bool, batch: int | None = None
) -> RunTime:
    """A row whose step does not fit its devices' memory: no run time, no cost, its figures
    (``batch``: the global batch of ``memory`` when the row's own is larger, not traced)."""
    error = memory.text()
    if batch is not None:
        error += f" already at batch {batch} (a larger batch needs more; not traced)"
    return RunTime(
        None, "modelled", epochs, 0.0, estimate={"memory": memory.to_dict()}, probe=probe,
        new_probe=new, error=error,
    )  # fmt: skip


class BatchLimits:
    """The largest batch of the search that fits each machine type, computed once per
    machine type and trace (``batch_sizes``: the search's, set when the screen starts)."""

    def __init__(self) -> None:
        self.batch_sizes: tuple[int, ...] = ()
        self._limits: dict[tuple[Any, ...], int | None] = {}

    def beyond(
        self,
        probe: ProbeResult,
        instance: InstanceType,
        catalog: Any,
        batch_size: int,
        store: Any = None,
    ) -> tuple[DeviceMemory, int] | None:
        """When ``batch_size`` is above ``instance``'s limit: the step memory of the smallest
        batch of the search that does not fit there (already computed, and a lower bound for
        the larger ones, which are never traced) and that batch; else None (it fits, or the
        limit is not known)."""
        if instance.provider == "local" or batch_size not in self.batch_sizes:
            return None
        have = capacity_bytes(instance, catalog)  # CPU machines: each its own RAM
        hps = json.dumps(probe.fingerprint.get("runtime_hyperparameters"), sort_keys=True)
        key = (instance.accelerator, instance.accelerator_count, have, probe.workload, hps,
               self.batch_sizes)  # fmt: skip
        if key not in self._limits:
            self._limits[key] = batch_limit(probe, instance, catalog, self.batch_sizes, store)
        limit = self._limits[key]
        if limit is not None and batch_size <= limit:
            return None
        first = min(b for b in self.batch_sizes if limit is None or b > limit)
        memory = machine_memory(probe, instance, catalog, first, store)
        return (memory, first) if memory is not None and memory.fits is False else None

    def check(
        self, probe: ProbeResult, instance: InstanceType, catalog: Any, batch: int, epochs: int,
        new: bool, store: Any = None,
    ) -> RunTime | None:  # fmt: skip
        """The does-not-fit row of ``batch`` above ``instance``'s limit, else None."""
        over = self.beyond(probe, instance, catalog, batch, store)
        if over is None:
            return None
        return does_not_fit(over[0], epochs, probe, new, None if over[1] == batch else over[1])

    def set_batches(self, batch_sizes: Sequence[int]) -> None:
        self.batch_sizes = tuple(sorted(set(batch_sizes)))


def planned_row(
    backend: Any, workload: WorkloadInfo, probe: ProbeResult, instance: InstanceType,
    batch: int, epochs: int, new: bool, nodes: int = 1, mode: str = "search",
    outpaced: Any = None,
) -> RunTime | tuple[Any, Any, dict[str, Any]]:  # fmt: skip
    """A catalog machine's row on the one prediction path under the fastest training plan that
    fits it (issue #35, ``forecast.plan_search``): its phases, its training run's estimate (the
    forecast's own: issue #46) and what the estimate records (the plan in words and as
    fields), or the does-not-fit row. When ``--plan`` pins the plain
    plan, a batch above the machine's limit is not predicted at all (``BatchLimits``).
    ``nodes`` > 1 (issue #49): ``nodes`` machines of the type (``timing.nodes``).
    ``mode`` (``best_forecast``'s): "plain" marks a row whose plain plans do not fit while
    other plans could (``UNSEARCHED``); "bound" gives the row's fastest plan, memory untraced;
    ``outpaced``: ``best_forecast``'s (the screen's stop for plans beaten elsewhere)."""
    from advisor.prediction.forecast.plan_search import best_forecast, searches
    from advisor.prediction.timing.nodes import memory_view

    fixed = dict(backend.settings.plan_fields)
    if not searches(fixed) and mode != "bound":
        view, _ = memory_view(instance, batch, nodes, fixed.get("replicate") == "nodes")
        over = backend.limits.check(probe, view, backend.catalog, batch, epochs, new,
                                    backend.cache)  # fmt: skip
        if over is not None:
            return over
    row, plan = best_forecast(
        probe, instance, backend.catalog, batch, epochs, workload.n_train, workload.n_val,
        precision=backend.settings.precision, fixed=fixed, sweep_epochs=(),
        data_bytes=workload.data_bytes, data_basis=workload.data_basis,
        ledger_storage=backend.ledger_storage, trace_store=backend.cache, nodes=nodes,
        mode=mode, outpaced=outpaced,
    )  # fmt: skip
    if row.memory is not None and row.memory.fits is False:
        out = does_not_fit(row.memory, epochs, probe, new)
        if mode == "plain" and searches(fixed):  # other plans were not looked at
            return replace(out, estimate={**out.estimate, UNSEARCHED: True})
        return out
    pred = row.prediction
    extra: dict[str, Any] = {"bottleneck": pred.bottleneck, "basis": pred.basis, "plan": pred.plan}
    terms = pred.step_terms()  # issue #47: what decided a multi-GPU row's step
    if terms is not None:
        extra["step_terms"] = terms
    if plan is not None:
        extra["training_plan"] = plan.to_dict()
    across = pred.breakdown.get("allreduce_across")
    if nodes > 1 and across is not None and pred.phases.t2.value > 0:  # issue #49
        extra["across_share"] = across / pred.phases.t2.value  # the step's time on the network
    if row.memory is not None:
        extra["memory"] = row.memory.to_dict()
    return pred.phases, row.training, extra
