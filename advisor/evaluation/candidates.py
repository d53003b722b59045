"""The machines a study chooses from: a catalog instance type, on demand or on spot capacity."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from advisor.providers.catalog import InstanceType, MachineKey
from advisor.search_spaces.space import MachineFilter


@dataclass(frozen=True)
class Candidate:
    """One machine choice: a catalog instance type, on demand or on spot capacity, on one
    machine or (issue #49, ``--max-nodes``) ``nodes`` of them joined by their network."""

    instance: InstanceType
    spot: bool = False
    nodes: int = 1

    def __post_init__(self) -> None:
        if self.spot and self.instance.spot_usd_per_h is None:
            raise ValueError(f"{self.instance.key} has no spot price, so spot=True is invalid")
        if self.nodes < 1:
            raise ValueError(f"nodes must be >= 1, got {self.nodes}")

    @property
    def key(self) -> MachineKey:
        """The Optuna ``machine`` value: ``service:instance_type`` (+ ``:xN``, ``:spot``)."""
        return MachineKey.of(self.instance.key, self.spot, self.nodes)

    @property
    def price_per_hour(self) -> float:
        """The hourly price of every machine of the candidate."""
        return self.instance.price(self.spot) * self.nodes

    @property
    def local(self) -> bool:
        return self.instance.provider == "local"


def node_counts(max_nodes: int) -> list[int]:
    """The node counts a study tries up to ``max_nodes``: 1, 2, 4, 8, ... (issue #49)."""
    out, n = [1], 2
    while n <= max_nodes:
        out.append(n)
        n *= 2
    return out


def matches(instance: InstanceType, machines: MachineFilter) -> bool:
    """Whether an instance passes a space's machine filter (the catalog's own filter aside)."""
    m = machines
    if m.providers and instance.provider not in m.providers:
        return False
    if m.services and instance.service not in m.services:
        return False
    if m.instance_types and not (
        instance.instance_type in m.instance_types or instance.key in m.instance_types
    ):
        return False
    if m.accelerators:
        acc = (instance.accelerator or "cpu").lower()
        if acc not in {a.lower() for a in m.accelerators}:
            return False
    if instance.accelerator_count < m.min_gpus:
        return False
    if m.max_gpus is not None and instance.accelerator_count > m.max_gpus:
        return False
    if m.region and instance.region and instance.region.lower() != m.region.strip().lower():
        return False  # issue #28: --region
    return not (m.max_price is not None and instance.on_demand_usd_per_h > m.max_price)


def predicted_only(instance: InstanceType) -> str | None:
    """Why advisor can predict ``instance`` but neither train nor probe there (None: it can).
    Issue #27: TPUs -- ``advisor.train`` and the Vertex tuning path refuse them (no
    PyTorch/XLA in the image), and their efficiencies in the performance model are priors."""
    if (instance.accelerator or "").upper().startswith("TPU"):
        return (
            "predicted only: advisor cannot train or probe on TPUs (no PyTorch/XLA in its image; "
            "the TPU step is fitted on one published run, benchmarks/tpu_results.py)"
        )
    return None


def offered(
    instance: InstanceType, include_previous_generation: bool = False, named: Any = ()
) -> bool:
    """Whether ``instance`` is a candidate for a recommendation (issue #27): never a
    predicted-only type; a previous-generation or retired type only when asked for or named in
    the space's ``instance_types`` (by key or native name)."""
    if predicted_only(instance) is not None:
        return False
    if instance.current or include_previous_generation:
        return True
    return instance.key in named or instance.instance_type in named


def owned_candidates(
    accelerators: dict[str, Any], machines: MachineFilter, rest: MachineFilter
) -> list[InstanceType]:
    """Issue #37: the machines you own (``advisor.providers.owned``) that pass the filter
    (``rest``: the filter less its accelerators, matched here by name or family)."""
    from advisor.providers.owned import owned_instances

    wanted = {a.lower() for a in machines.accelerators}
    return [
        i
        for i in owned_instances(accelerators)
        if matches(i, rest)
        and (not wanted or (acc := (i.accelerator or "cpu").lower()) in wanted
             or acc.partition("-")[0] in wanted)
    ]  # fmt: skip
