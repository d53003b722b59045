"""Where one row's batch lands (issue #46): the machines and their devices, the global batch,
the batch each data-parallel replica runs, the micro-batch its plan accumulates over, and the
plan.

``place`` is the one place the global batch is split per device and per micro-step; the
forecast makes one ``Placement`` per row and hands it to the step's time
(``timing.model.predict``, ``timing.accel``) and memory (``memory.device``), so both read the
same split. ``advisor.train`` splits the same way (``DistributedSampler``: ``ceil(B / n)`` per
replica)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from advisor.errors import AdvisorError
from advisor.prediction.step.plan import TrainingPlan

if TYPE_CHECKING:
    from advisor.providers.catalog import InstanceType


@dataclass(frozen=True)
class Placement:
    """One row's split of the global ``batch`` over ``devices`` replicas (every GPU of every
    one of ``nodes`` machines) under ``plan`` (None: the plain float32 step). ``per_device``:
    each replica's batch; ``micro``: the batch of one accumulation micro-step (``per_device``
    without accumulation)."""

    batch: int
    devices: int
    plan: TrainingPlan | None = None
    nodes: int = 1
    per_device: int = field(init=False)
    micro: int = field(init=False)

    def __post_init__(self) -> None:
        if self.batch < 1:
            raise AdvisorError(
                f"Batch size must be > 0, but got {self.batch}.", "pass a positive batch."
            )
        per_device = math.ceil(self.batch / max(1, self.devices))
        micro = per_device if self.plan is None else self.plan.micro_batch(per_device)
        object.__setattr__(self, "per_device", per_device)
        object.__setattr__(self, "micro", micro)

    @property
    def shards(self) -> int:
        """The GPUs a sharded plan splits its state over: every one, or under HSDP
        (``replicate=nodes``, issue #49) one machine's."""
        if self.plan is not None and self.plan.replicate == "nodes":
            return max(1, self.devices // max(1, self.nodes))
        return self.devices

    @property
    def planned(self) -> bool:
        """Whether the step runs under a plan other than the plain float32 one."""
        return self.plan is not None and self.plan != TrainingPlan()


def place(
    machine: InstanceType, batch: int, plan: TrainingPlan | None = None, nodes: int = 1
) -> Placement:
    """The placement of the global ``batch`` under ``plan`` on ``nodes`` machines like
    ``machine``: one replica per accelerator (a CPU machine: one replica, which ignores the
    plan)."""
    if machine.accelerator is None:
        return Placement(batch, 1, None)
    nodes = max(1, nodes)
    return Placement(batch, max(1, machine.accelerator_count) * nodes, plan, nodes)
