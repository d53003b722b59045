"""What a cloud run pays besides its training steps: start-up overheads and billing granularity,
per service, each a documented fact with its source or a marked prior with an interval.

A managed job (SageMaker training job, Vertex AI CustomJob, Azure ML command job) or a VM first
provisions an instance, pulls the container image (or boots the VM), downloads the data, and
only then trains; the bill counts some of those phases and rounds the billed time to the
service's increment with its minimum. For a 20-second training run these terms dominate, so
``run_overheads`` returns them as their own terms for the report; the one pricing path
(``providers/pricing.py`` ``price_run(..., overheads=...)``) adds them to the run's time and
bill and applies the service's billing rule once, on the total.

Issue #27: one rule for every service. A job brings the advisor's container image
(``docker/Dockerfile``) wherever it runs, so a plain VM pays the image pull and container start
after its boot, as a managed job does after its provisioning (``container=False`` leaves it out
for a job that runs in the VM's own environment). A remote probe job's measured start-up
replaces the priors of its service (``measured_startup``), and an imported tuning trial's
measured run time is billed by the same rules (``bill_measured_job``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from advisor.providers.catalog import InstanceType
from advisor.providers.pricing import BillingRule, billing_rule, price_run

from advisor.errors import AdvisorError
from advisor.intervals import ZERO, Interval

DOCUMENTED = "documented"
PRIOR = "prior"
MEASURED = "measured"


@dataclass(frozen=True)
class Overhead:
    """One phase before (or after) training: its seconds, whether the bill counts it, and
    whether the figure is ``documented`` (``source`` is the document) or a ``prior``."""

    phase: str
    seconds: Interval
    billed: bool
    status: str
    source: str

    def __post_init__(self) -> None:
        if self.seconds.low < 0:
            raise ValueError(f"an overhead's seconds must be >= 0, got {self.seconds}")


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

PULL = "image pull + container start"
# The advisor image (CUDA runtime + PyTorch, docker/Dockerfile) is the same on every service, so
# its pull has one prior; Azure ML's is wider (it prepares its environment image first).
_IMAGE = "prior for the advisor's ~5-10 GB framework image (docker/Dockerfile)"
_VM_PULL = (
    f"{_IMAGE}: docker pull and start on the booted VM; billed, as the VM bills from its boot "
    "(the same pull a managed job pays)"
)

# (provider, service) -> the phases before training (billing: providers.pricing.BILLING)
SERVICES: dict[tuple[str, str], tuple[Overhead, ...]] = {
    ("aws", "sagemaker"): (
        Overhead("provisioning", Interval(90, 45, 300), False, PRIOR, _PRIOR_START),
        Overhead(PULL, Interval(60, 20, 180), True, PRIOR, f"{_IMAGE}; billed per {_SM_BILL}"),
    ),
    ("gcp", "vertex"): (
        Overhead("provisioning", Interval(120, 60, 420), False, PRIOR, _PRIOR_START),
        Overhead(
            PULL, Interval(60, 20, 180), True, PRIOR,
            f"{_IMAGE}; whether Vertex bills the pull is not documented here: counted as billed",
        ),
    ),
    ("azure", "azure-ml"): (
        Overhead(
            "provisioning", Interval(180, 60, 600), False, PRIOR,
            f"{_PRIOR_START}; an Azure ML compute cluster scaled to 0 nodes allocates one first",
        ),
        Overhead(PULL, Interval(90, 20, 300), True, PRIOR,
                 f"{_IMAGE}, prepared as an Azure ML environment; a node bills from allocation, "
                 "so the pull is billed"),
    ),
    ("aws", "ec2"): (
        Overhead("VM boot", Interval(45, 20, 120), True, PRIOR, "prior: Linux AMI boot to SSH"),
        Overhead(PULL, Interval(60, 20, 180), True, PRIOR, _VM_PULL),
    ),
    ("gcp", "compute-engine"): (
        Overhead("VM boot", Interval(45, 20, 120), True, PRIOR, "prior: Linux image boot to SSH"),
        Overhead(PULL, Interval(60, 20, 180), True, PRIOR, _VM_PULL),
    ),
    ("azure", "azure-vm"): (
        Overhead("VM boot", Interval(60, 30, 180), True, PRIOR, "prior: Linux image boot to SSH"),
        Overhead(PULL, Interval(60, 20, 180), True, PRIOR, _VM_PULL),
    ),
    ("local", "local"): (),
    ("owned", "owned"): (),  # issue #37: your own machine, running and holding the data
}  # fmt: skip
VM_SERVICES = ("ec2", "compute-engine", "azure-vm")

# Data download from object storage in the same region (prior: per-instance S3/GCS/Blob
# throughput for a single-stream copy; wide interval).
DOWNLOAD_BYTES_PER_S = Interval(200e6, 50e6, 1000e6)


@dataclass(frozen=True)
class RunOverheads:
    """The overhead terms of one run on one machine, and the billing that applies."""

    service: str
    terms: tuple[Overhead, ...]
    billing: BillingRule

    @property
    def wall(self) -> Interval:
        """Seconds before training starts (all terms)."""
        return sum((t.seconds for t in self.terms), ZERO)

    @property
    def billed(self) -> Interval:
        """Seconds of those that the bill counts."""
        return sum((t.seconds for t in self.terms if t.billed), ZERO)

    def billed_run(self, train_s: Interval) -> Interval:
        """Billed seconds of a run whose training takes ``train_s``, granularity applied
        (``providers.pricing.price_run``, the one formula)."""
        return price_run(train_s, 0.0, overheads=self).billed

    def cost(self, train_s: Interval, usd_per_h: float) -> Interval:
        """USD of the run at ``usd_per_h``, overheads and granularity included."""
        return price_run(train_s, usd_per_h, overheads=self).cost

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RunOverheads:
        """The overheads ``to_dict`` wrote (a trial's ``estimate["overheads"]``)."""
        b = d["billing"]
        terms = tuple(
            Overhead(
                str(t["phase"]),
                Interval.from_dict(t["seconds"]),
                bool(t["billed"]),
                str(t["status"]),
                str(t["source"]),
            )
            for t in d.get("terms") or ()
        )
        rule = BillingRule(float(b["increment_s"]), float(b["minimum_s"]), str(b["source"]))
        return cls(str(d["service"]), terms, rule)

    def to_dict(self) -> dict[str, Any]:
        """The terms (phase, seconds, billed, status, source) and the billing rule."""
        return {
            "service": self.service,
            "terms": [
                {
                    "phase": t.phase,
                    "seconds": t.seconds.to_dict(),
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


def run_overheads(
    machine: InstanceType, data_bytes: float = 0.0, data_basis: str = "", container: bool = True
) -> RunOverheads:
    """The start-up terms and billing of a run on ``machine``; ``data_bytes`` of training
    data downloaded before training adds a (billed) "data download" term (``data_basis``
    says where the size comes from). The local machine has none. ``container``: the job
    brings the advisor's image (always on a managed service; on a VM, False leaves the pull
    out for a job run in the VM's own environment)."""
    return overheads_for(machine.provider, machine.service, data_bytes, data_basis, container)


def overheads_for(
    provider: str,
    service: str,
    data_bytes: float = 0.0,
    data_basis: str = "",
    container: bool = True,
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
    if not container and service in VM_SERVICES:
        terms = tuple(t for t in terms if t.phase != PULL)
    if data_bytes > 0 and provider not in ("local", "owned"):
        rate = DOWNLOAD_BYTES_PER_S
        span = Interval(data_bytes / rate.value, data_bytes / rate.high, data_bytes / rate.low)
        source = f"prior: 200 MB/s (50-1000) same-region, for {data_bytes / 1e9:.3g} GB"
        terms = (
            *terms,
            Overhead(
                "data download", span, True, PRIOR,
                source + (f" ({data_basis})" if data_basis else ""),
            ),
        )  # fmt: skip
    return RunOverheads(service, terms, billing_rule(service))


# -- issue #27: measured start-up, and measured jobs billed by the same rules ----------------


def measured_startup(
    base: RunOverheads, before_s: float, on_machine_s: float, job: str
) -> RunOverheads:
    """``base`` (the priors of a managed service) with a remote probe job's measured start-up in
    their place: ``before_s`` (submission to the job starting on the machine: provisioning)
    replaces the unbilled priors, ``on_machine_s`` (the billed time on the machine that was not
    the probe itself: image pull, container start, interpreter start, upload) the billed ones;
    the data download (no probe downloads data) stays a prior. One job is one draw of a
    varying start-up, so each measured value keeps its prior's relative interval."""
    if not (0 <= before_s < float("inf") and 0 <= on_machine_s < float("inf")):
        raise ValueError(f"measured start-up must be >= 0, got {before_s}, {on_machine_s}")

    def like(prior: Interval, value: float) -> Interval:
        if prior.value <= 0:
            return Interval.exact(value)
        return Interval(value, value * prior.low / prior.value, value * prior.high / prior.value)

    download = tuple(t for t in base.terms if t.phase == "data download")
    rest = [t for t in base.terms if t.phase != "data download"]
    unbilled = sum((t.seconds for t in rest if not t.billed), ZERO)
    billed = sum((t.seconds for t in rest if t.billed), ZERO)
    source = f"measured by remote probe job {job}"
    terms = (
        Overhead(
            "provisioning (measured)", like(unbilled, before_s), False, MEASURED,
            f"{source}: submission to the job's start on the machine; interval: the prior's",
        ),
        Overhead(
            f"{PULL} (measured)", like(billed, on_machine_s), True, MEASURED,
            f"{source}: billed time on the machine less the probe's own run; interval: the "
            "prior's",
        ),
    )  # fmt: skip
    return RunOverheads(base.service, terms + download, base.billing)


@dataclass(frozen=True)
class MeasuredSpan:
    """What a managed service's reported run time of a training job covers: ``"billed"`` (its
    billed start-up terms and the training), ``"all"`` (every start-up term and the training)
    or ``"training"`` (the training alone), and why we read it so."""

    covers: str
    source: str


# How each service's reported trial run time (providers/{sagemaker,vertex,azureml}.py
# ``TrialResult.runtime_s``) relates to the start-up terms above.
MEASURED_SPANS: dict[str, MeasuredSpan] = {
    "sagemaker": MeasuredSpan(
        "billed", f"TrainingTimeInSeconds, TrainingStartTime to TrainingEndTime ({_SM_BILL})"
    ),
    "vertex": MeasuredSpan(
        "all",
        "prior: a tuning trial's start_time to end_time, taken to span its job's provisioning "
        "and image pull (the trial starts before its job runs)",
    ),
    "azure-ml": MeasuredSpan(
        "training",
        "prior: the trial's MLflow run, taken to span the training script only (it starts "
        "once the container runs)",
    ),
}


def bill_measured_job(
    provider: str, service: str, measured_s: float, billed_s: float | None = None
) -> tuple[Interval, str]:
    """Billed seconds of a finished job whose service reported ``measured_s`` seconds (and
    ``billed_s`` where it reports its bill): the bill when given (a read-out); else the
    billed start-up terms the measured span leaves out are added, or the unbilled ones it
    includes taken off (``MEASURED_SPANS``), and the billing rule applied once to the total --
    the rule ``price_run`` applies to predictions. Returns the seconds and how they were got."""
    if billed_s is not None:
        return Interval.exact(billed_s), "billed seconds reported by the service"
    over = overheads_for(provider, service)
    span = MEASURED_SPANS.get(service, MeasuredSpan("billed", "prior: taken as the billed span"))
    billed_terms = sum((t.seconds for t in over.terms if t.billed), ZERO)
    unbilled_terms = sum((t.seconds for t in over.terms if not t.billed), ZERO)
    m = float(measured_s)
    u = unbilled_terms
    if span.covers == "training":
        raw = [m + billed_terms.value, m + billed_terms.low, m + billed_terms.high]
    elif span.covers == "all":  # the low bound takes the most unbilled time off
        raw = [max(m - u.value, 0.0), max(m - u.high, 0.0), max(m - u.low, 0.0)]
    else:
        raw = [m, m, m]
    rule = over.billing
    value, low, high = (rule.billed(x) for x in raw)
    return Interval(value, min(low, value), max(high, value)), f"{span.source}; {rule.source}"
