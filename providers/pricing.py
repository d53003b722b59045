"""One pricing path: what a run of a given length costs on a machine, on demand or on spot.

Everything that turns a run time into money goes through :func:`price_run` (the study's
scorer, the report's epoch sweep, ``advisor predict`` and the iteration-time model), so the
same inputs give the same numbers everywhere. Three rules, each with its source:

- **Price**: the catalog's hourly list price, on demand or spot (``InstanceType.price``; each
  catalog row names the page it was read from).
- **Spot restart overhead** (a *prior*, not a measurement): a run on spot/preemptible capacity
  pays interruptions (checkpoint, lost work since it, restart). We add
  :data:`SPOT_RESTART_OVERHEAD` (+10 %) to the expected run time and widen the upper bound by
  :data:`SPOT_RESTART_OVERHEAD_HIGH` (+30 %); the lower bound is an uninterrupted run.
- **Billing**: the billed time is the run time rounded up to the service's billing increment,
  and at least its minimum (:data:`BILLING`). Per-second rounding (< 1 s) is below the model's
  resolution and is not applied; minimums and coarser increments are.
- **Start-up** (issue #14): a run on a cloud machine first provisions it, pulls the image or
  boots the VM and downloads the data (``providers/overheads.py``: each term documented or a
  marked prior). Given those ``overheads``, the run's wall time is start-up + training, and
  the billed time is the billed start-up terms + training, the billing rule applied once to
  that total. The local machine has none.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from advisor.intervals import ZERO, Interval

if TYPE_CHECKING:
    from advisor.providers.catalog import InstanceType

SPOT_RESTART_OVERHEAD = 0.10  # prior: expected extra run time on spot capacity
SPOT_RESTART_OVERHEAD_HIGH = 0.30  # prior: upper bound of that extra time


@dataclass(frozen=True)
class BillingRule:
    """How a service bills a running machine: in ``increment_s`` steps, at least ``minimum_s``."""

    increment_s: float
    minimum_s: float
    source: str

    @property
    def status(self) -> str:
        """``prior`` when the rule is not read out from a document, else ``documented``."""
        return "prior" if self.source.startswith("prior") else "documented"

    def billed(self, seconds: float) -> float:
        """The seconds billed for a run of ``seconds``."""
        if seconds <= 0:
            return 0.0
        if self.increment_s > 1.0:
            seconds = math.ceil(seconds / self.increment_s - 1e-9) * self.increment_s
        return max(seconds, self.minimum_s)


PER_SECOND = BillingRule(1.0, 0.0, "prior: per-second billing without a minimum")
BILLING: dict[str, BillingRule] = {
    # aws.amazon.com/ec2/pricing/on-demand ("Per Second Billing"): Linux instances are billed
    # per second with a minimum of 60 seconds, on demand and spot alike.
    "ec2": BillingRule(1.0, 60.0, "AWS EC2 pricing page: per second, 60 s minimum"),
    # aws.amazon.com/sagemaker/pricing: training is billed per second of instance use.
    "sagemaker": BillingRule(1.0, 0.0, "AWS SageMaker pricing page: per second"),
    # cloud.google.com/compute/all-pricing: per-second billing with a 1-minute minimum.
    "compute-engine": BillingRule(1.0, 60.0, "GCE pricing page: per second, 1 min minimum"),
    # cloud.google.com/vertex-ai/pricing: custom training is billed in 30-second increments.
    # Not re-checked offline: a prior.
    "vertex": BillingRule(30.0, 30.0, "prior: Vertex AI pricing page, 30 s increments"),
    # Azure VMs (and Azure ML compute, billed as its VMs) per the Azure pricing FAQ: per
    # minute. Not re-checked offline: a prior.
    "azure-vm": BillingRule(60.0, 60.0, "prior: Azure pricing FAQ, per minute"),
    "azure-ml": BillingRule(60.0, 60.0, "prior: Azure pricing FAQ, per minute"),
    "local": BillingRule(1.0, 0.0, "your own machine: not billed"),
    # issue #37: a machine you own costs its amortisation + energy per second of use.
    "owned": BillingRule(1.0, 0.0, "your own machine: amortisation + energy per second of use"),
}


def billing_rule(service: str | None) -> BillingRule:
    """The billing rule of a service (per second, no minimum for an unknown one: a prior)."""
    return BILLING.get(service or "", PER_SECOND)


class StartUp(Protocol):
    """What a run pays before training (``advisor.providers.overheads.RunOverheads`` is one):
    its wall seconds, the seconds of those the bill counts, the service's billing rule."""

    @property
    def wall(self) -> Interval: ...
    @property
    def billed(self) -> Interval: ...
    @property
    def billing(self) -> BillingRule: ...
    def to_dict(self) -> dict[str, Any]: ...


def spot_runtime(runtime: Interval, spot: bool) -> Interval:
    """The run time on spot capacity: expected +10 %, upper bound +30 % (priors)."""
    if not spot:
        return runtime
    return Interval(
        runtime.value * (1 + SPOT_RESTART_OVERHEAD),
        runtime.low,
        runtime.high * (1 + SPOT_RESTART_OVERHEAD_HIGH),
    )


def usd(seconds: float, price_per_hour: float) -> float:
    """``seconds`` of a machine at ``price_per_hour`` USD/h, pro rata (no billing rule)."""
    return seconds * price_per_hour / 3600.0


@dataclass(frozen=True)
class PricedRun:
    """A run's wall time (start-up + training, the spot overhead on the training when on
    spot), its billed seconds and cost. Without start-up overheads ``runtime == training``."""

    runtime: Interval
    cost: Interval
    price_per_hour: float
    spot: bool
    billing: BillingRule
    training: Interval = ZERO
    startup: Interval = ZERO
    billed: Interval = ZERO
    overheads: StartUp | None = None

    def notes(self) -> dict[str, Any]:
        """What was applied beyond time x price, for a trial's estimate: the spot overhead
        (on spot) and the start-up terms with the billing applied (given overheads)."""
        out: dict[str, Any] = {}
        if self.spot:
            out["spot_restart_overhead"] = {
                "expected": SPOT_RESTART_OVERHEAD,
                "high": SPOT_RESTART_OVERHEAD_HIGH,
            }
        if self.overheads is not None:
            out["overheads"] = {
                **self.overheads.to_dict(),
                "startup_s": self.startup.to_dict(),
                "training_s": self.training.to_dict(),
                "job_wall_s": self.runtime.to_dict(),
                "job_billed_s": self.billed.to_dict(),
                "job_cost_usd": self.cost.to_dict(),
            }
        return out


def price_run(
    runtime: Interval,
    price_per_hour: float,
    *,
    spot: bool = False,
    service: str | None = None,
    overheads: StartUp | None = None,
) -> PricedRun:
    """Price a run whose on-demand training time is ``runtime`` at ``price_per_hour`` USD/h
    (the spot price when ``spot``) on ``service``: the spot overhead on the training; given
    ``overheads``, their wall seconds before it and their billed seconds on the bill; then
    the billing rule (``overheads.billing``, else ``service``'s) once on the billed total.
    Each bound adds its terms' bounds (low with low, high with high)."""
    if price_per_hour < 0:
        raise ValueError(f"price_per_hour must be >= 0, but got {price_per_hour}")
    rule = billing_rule(service) if overheads is None else overheads.billing
    train = spot_runtime(runtime, spot)
    wall = billed_start = ZERO
    if overheads is not None:
        wall, billed_start = overheads.wall, overheads.billed
    billed = (billed_start + train).map(rule.billed)
    cost = billed.map(lambda b: usd(b, price_per_hour))
    return PricedRun(wall + train, cost, price_per_hour, spot, rule, train, wall, billed, overheads)


def price_on(
    instance: InstanceType, runtime: Interval, spot: bool = False, overheads: StartUp | None = None
) -> PricedRun:
    """``price_run`` with the instance's list price and service."""
    return price_run(
        runtime, instance.price(spot), spot=spot, service=instance.service, overheads=overheads
    )
