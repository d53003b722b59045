"""The first answer's back end (issue #36): the GPU machines from the operator trace alone,
before any local probe is timed.

A GPU row reads the local probe's operator trace and the DataLoader's time, never its step
time (``advisor.prediction.timing``), so the machine ranking over GPU machines can be given
while the local probes still have to run. ``TraceOnlyBackend`` is the local back end with
every probe replaced by the stand-in a model too big to time here gets
(``advisor.evaluation.untimed``: the step traced on the meta device, the DataLoader timed with
the model on the meta device, the host's initialisation a prior) and with the machines that
need the local step time (CPU machines and this one) left out. Its rows are labelled as traced
without a local timing, with the reason; the final answer replaces them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from advisor.evaluation.local import LocalBackend
from advisor.evaluation.workload import WorkloadInfo
from advisor.probes.result import ProbeResult
from advisor.providers.catalog import InstanceType
from advisor.search_spaces.space import MachineFilter

REASON = "the first answer, given before the local probes are timed"


class TraceOnlyBackend(LocalBackend):
    """GPU machines only, each from the stand-in probe of its batch size (see the module)."""

    name = "trace"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._stand_ins: dict[tuple[int, str], ProbeResult] = {}

    def _instances(self, machines: MachineFilter) -> list[InstanceType]:
        return [i for i in super()._instances(machines) if i.accelerator is not None]

    def prefetch(self, workload: WorkloadInfo, batch_sizes: Sequence[int]) -> None:
        """Nothing is timed here (the memory limits still learn the batch sizes)."""
        self.limits.set_batches(batch_sizes)

    def probe(
        self, workload: WorkloadInfo, batch_size: int, hps: dict[str, Any], noise: bool = False
    ) -> tuple[ProbeResult, bool]:
        """The stand-in probe at ``batch_size`` (traced once per batch size and runtime
        hyperparameters); never a new timed probe."""
        import dataclasses
        import json

        from advisor.evaluation.untimed import decide, untimed_probe

        rt_hps = {k: hps[k] for k in self.runtime_params if k in hps}
        key = (batch_size, json.dumps(rt_hps, sort_keys=True, default=str))
        if key not in self._stand_ins:
            decision = decide(workload.name, batch_size, workload.framework, rt_hps)
            if decision is None:
                raise RuntimeError(f"{workload.name} cannot be traced at batch {batch_size}")
            decision = dataclasses.replace(decision, reason=REASON)
            self._stand_ins[key] = untimed_probe(
                workload.name, batch_size, decision, workload.framework, rt_hps,
                workload.n_train, workload.n_val, self._scaled_loader(batch_size),
            )  # fmt: skip
        return self._stand_ins[key], False

    def basis(self) -> str | None:
        """What the rows rest on, in words (``untimed.untimed_note`` of a stand-in), and how
        the DataLoader's time was had."""
        from advisor.evaluation.untimed import untimed_note

        probes = list(self._stand_ins.values())  # the first one's DataLoader was timed
        if not probes:
            return None
        scaled = sorted(p.batch_size for p in probes[1:] if p.fingerprint.get("data_s"))
        extra = (
            f" The DataLoader's time was timed at batch {probes[0].batch_size} and scaled per "
            f"sample to batch {', '.join(map(str, scaled))}."
            if scaled
            else ""
        )
        return (untimed_note(probes[0]) or "") + extra

    def _scaled_loader(self, batch_size: int) -> Any:
        """The DataLoader's time at ``batch_size`` scaled per sample from the first batch
        size timed (None: none timed yet, so this one is timed). Its CPU time per sample held
        within 10 % over batch sizes 256-1024 (docs/benchmarks.md, "The first answer"): a
        measured stand-in, which the final answer replaces with each batch size's own."""
        from advisor.prediction.step.loader import LoaderTiming

        timed = next(
            (p for p in self._stand_ins.values() if p.fingerprint.get("data_s") is not None),
            None,
        )
        if timed is None:
            return None
        per_sample = float(timed.fingerprint["data_s"]) / timed.batch_size
        return LoaderTiming(
            per_sample * batch_size,
            timed.fingerprint.get("input_bytes_per_sample"),
            timed.n_train,
            timed.n_val,
            f"scaled per sample from batch {timed.batch_size}",
        )

    def ready(
        self,
        workload: WorkloadInfo,
        batch_size: int,
        hps: dict[str, Any],
        probe: ProbeResult,
        noise: bool = False,
    ) -> ProbeResult:
        """The stand-in carries its trace and loader time already; nothing is cached."""
        return probe
