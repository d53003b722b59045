"""What a cloud run pays besides its training steps: start-up overheads and billing granularity,
per service, each a documented fact with its source or a marked prior with an interval.

A managed job (SageMaker training job, Vertex AI CustomJob, Azure ML command job) or a VM first
provisions an instance, pulls the container image (or boots the VM), downloads the data, and
only then trains; the bill counts some of those phases and rounds the billed time to the
service's increment with its minimum. For a 20-second training run these terms dominate, so
``run_overheads`` returns them as their own terms for the report; the one pricing path
(``providers/pricing.py`` ``price_run(..., overheads=...)``) adds them to the run's time and
bill and applies the service's billing rule once, on the total.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from advisor.providers.catalog import InstanceType
from advisor.providers.pricing import BillingRule, billing_rule, price_run

from advisor.errors import AdvisorError

DOCUMENTED = "documented"
PRIOR = "prior"


@dataclass(frozen=True)
class Span:
    """Seconds with an interval ``low <= value <= high``."""

    value: float
    low: float
    high: float

    def __post_init__(self) -> None:
        if not 0 <= self.low <= self.value <= self.high:
            raise ValueError(f"need 0 <= low <= value <= high, got {self}")

    def __add__(self, other: Span) -> Span:
        return Span(self.value + other.value, self.low + other.low, self.high + other.high)


@dataclass(frozen=True)
class Overhead:
    """One phase before (or after) training: its seconds, whether the bill counts it, and
    whether the figure is ``documented`` (``source`` is the document) or a ``prior``."""

    phase: str
    seconds: Span
    billed: bool
    status: str
    source: str


_SM_BILL = (
    "SageMaker API reference, DescribeTrainingJob TrainingStartTime/TrainingEndTime: billed "
    "from the start on the training instances (after provisioning) to the end, which includes "
    "the data download and container start (the difference to the CloudWatch start 'is due to "
    "the time it takes to download the training data and to the size of the training "
    "container'); BillableTimeInSeconds is whole seconds"
)
_PRIOR_START = (
    "prior: typical start-up reported by users and vendors' blogs (instance provisioning "
    "1-5 min for managed jobs; not read out from a document)"
)

# (provider, service) -> the phases before training (billing: providers.pricing.BILLING)
SERVICES: dict[tuple[str, str], tuple[Overhead, ...]] = {
    ("aws", "sagemaker"): (
        Overhead("provisioning", Span(90, 45, 300), False, PRIOR, _PRIOR_START),
        Overhead(
            "image pull + container start", Span(60, 20, 180), True, PRIOR,
            f"prior for a ~5-10 GB framework image; billed per {_SM_BILL}",
        ),
    ),
    ("gcp", "vertex"): (
        Overhead("provisioning", Span(120, 60, 420), False, PRIOR, _PRIOR_START),
        Overhead(
            "image pull + container start", Span(60, 20, 180), True, PRIOR,
            "prior; whether Vertex bills the pull is not documented here: counted as billed",
        ),
    ),
    ("azure", "azure-ml"): (
        Overhead(
            "provisioning", Span(180, 60, 600), False, PRIOR,
            f"{_PRIOR_START}; an Azure ML compute cluster scaled to 0 nodes allocates one first",
        ),
        Overhead("image pull + container start", Span(90, 20, 300), True, PRIOR,
                 "prior; a node bills from allocation, so the pull is billed"),
    ),
    ("aws", "ec2"): (Overhead("VM boot", Span(45, 20, 120), True, PRIOR, "prior: Linux AMI boot to SSH"),),
    ("gcp", "compute-engine"): (
        Overhead("VM boot", Span(45, 20, 120), True, PRIOR, "prior: Linux image boot to SSH"),
    ),
    ("azure", "azure-vm"): (
        Overhead("VM boot", Span(60, 30, 180), True, PRIOR, "prior: Linux image boot to SSH"),
    ),
    ("local", "local"): (),
}  # fmt: skip

# Data download from object storage in the same region (prior: per-instance S3/GCS/Blob
# throughput for a single-stream copy; wide interval).
DOWNLOAD_BYTES_PER_S = Span(200e6, 50e6, 1000e6)


@dataclass(frozen=True)
class RunOverheads:
    """The overhead terms of one run on one machine, and the billing that applies."""

    service: str
    terms: tuple[Overhead, ...]
    billing: BillingRule

    @property
    def wall(self) -> Span:
        """Seconds before training starts (all terms)."""
        return sum((t.seconds for t in self.terms), Span(0, 0, 0))

    @property
    def billed(self) -> Span:
        """Seconds of those that the bill counts."""
        return sum((t.seconds for t in self.terms if t.billed), Span(0, 0, 0))

    def billed_run(self, train_s: Span) -> Span:
        """Billed seconds of a run whose training takes ``train_s``, granularity applied
        (``providers.pricing.price_run``, the one formula)."""
        return Span(*price_run(train_s, 0.0, overheads=self).billed)

    def cost(self, train_s: Span, usd_per_h: float) -> Span:
        """USD of the run at ``usd_per_h``, overheads and granularity included."""
        return Span(*price_run(train_s, usd_per_h, overheads=self).cost)

    def to_dict(self) -> dict[str, Any]:
        """The terms (phase, seconds, billed, status, source) and the billing rule."""
        return {
            "service": self.service,
            "terms": [
                {
                    "phase": t.phase,
                    "seconds": _span_dict(t.seconds),
                    "billed": t.billed,
                    "status": t.status,
                    "source": t.source,
                }
                for t in self.terms
            ],
            "billing": {
                "increment_s": self.billing.increment_s,
                "minimum_s": self.billing.minimum_s,
                "status": self.billing.status,
                "source": self.billing.source,
            },
        }


def _span_dict(s: Span) -> dict[str, float]:
    return {"value": s.value, "low": s.low, "high": s.high}


def run_overheads(
    machine: InstanceType, data_bytes: float = 0.0, data_basis: str = ""
) -> RunOverheads:
    """The start-up terms and billing of a run on ``machine``; ``data_bytes`` of training
    data downloaded before training adds a (billed) "data download" term (``data_basis``
    says where the size comes from). The local machine has none."""
    return overheads_for(machine.provider, machine.service, data_bytes, data_basis)


def overheads_for(
    provider: str, service: str, data_bytes: float = 0.0, data_basis: str = ""
) -> RunOverheads:
    """``run_overheads`` by the machine's provider and service."""
    key = (provider, service)
    if key not in SERVICES:
        raise AdvisorError(
            f"No overhead figures for {provider}/{service}.",
            "add the service to providers/overheads.py SERVICES with its sources.",
        )
    if not 0 <= data_bytes < float("inf"):
        raise AdvisorError(f"data_bytes must be >= 0, but got {data_bytes}.", "pass a size.")
    terms = SERVICES[key]
    if data_bytes > 0 and provider != "local":
        rate = DOWNLOAD_BYTES_PER_S
        span = Span(data_bytes / rate.value, data_bytes / rate.high, data_bytes / rate.low)
        source = f"prior: 200 MB/s (50-1000) same-region, for {data_bytes / 1e9:.3g} GB"
        terms = (
            *terms,
            Overhead(
                "data download", span, True, PRIOR,
                source + (f" ({data_basis})" if data_basis else ""),
            ),
        )  # fmt: skip
    return RunOverheads(service, terms, billing_rule(service))
