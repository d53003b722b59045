"""Score one candidate (machine, batch size, hyperparameters): time, cost, and how we know.

A back end turns a candidate into an ``Evaluation``. The base class ``Backend`` does the
bookkeeping once (candidate list with spot variants, prices, spot restart overhead, counting
new probes); subclasses fill in a few private hooks:

- ``LocalBackend``: real probes on this machine (``advisor.probes.runner.run_probe``, cached in
  the study storage), measured phases for the local machine, the performance model
  (``advisor.probes.perf.model.predict_phases``) for catalog machines, and the
  iteration-time model (``advisor.probes.iteration_model.estimate``) for the run.
- ``advisor.replay.ReplayBackend``: serves a fixed recorded table; used by tests and the
  search-efficiency benchmark exactly the way the real back end is used.

Iteration time depends on (workload, batch size, hardware), not on the learning rate or
dropout: probes are cached by that key (plus hyperparameters flagged ``affects_runtime``).

Prices: ``Backend._finish`` prices every run through the one pricing path
(``advisor.providers.pricing``: list price on demand or spot, the spot restart overhead, the
start-up overheads of the machine's service (``advisor.providers.overheads``, issue #14), the
service's billing rule), the same path ``advisor predict`` and the report use. An
``Evaluation``'s runtime and cost are the whole job's (start-up + training): what the user
waits for and pays, and what the budget and deadline judge; the terms are in its
``estimate["overheads"]``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from advisor.probes.epochs_fit import fit_noise_scale, fitted_epochs
from advisor.probes.epochs_model import EpochsAnchor, EpochsEstimate, predict_epochs
from advisor.probes.result import Interval, PhaseTimes, ProbeResult
from advisor.providers.catalog import InstanceType
from advisor.search_spaces.space import JointSpace, MachineFilter
from advisor.space_checks import check_instance_types

if TYPE_CHECKING:
    from advisor.search_spaces.workloads import Workload


SPOT_SUFFIX = ":spot"


@dataclass(frozen=True)
class WorkloadInfo:
    """What the scorer needs to know about the workload being placed."""

    name: str
    framework: str = "torch"
    n_train: int = 0
    n_val: int = 0
    epochs: int | None = None  # the user's --epochs; None: epochs_to_stabilise per batch size
    epochs_to_stabilise: dict[int, int] = field(default_factory=dict)
    default_epochs: int = 10
    at_batch: int | None = None  # issue #19: --at-batch, the batch size --epochs was seen at
    # issue #19: --epochs-at B=N, epochs known at other batch sizes (sorted (B, N) pairs)
    epochs_at: tuple[tuple[int, int], ...] = ()
    # issue #14: bytes a cloud job downloads before training (0: unknown, term left out)
    data_bytes: float = 0.0
    data_basis: str = ""  # where that size comes from

    def __post_init__(self) -> None:
        if self.n_train <= 0:
            raise ValueError(f"n_train must be > 0, but got {self.n_train}")
        if self.n_val < 0:
            raise ValueError(f"n_val must be >= 0, but got {self.n_val}")
        if self.epochs is not None and self.epochs <= 0:
            raise ValueError(f"epochs must be > 0, but got {self.epochs}")
        if self.at_batch is not None and (self.at_batch <= 0 or self.epochs is None):
            raise ValueError(f"at_batch needs epochs and must be > 0, got {self.at_batch}")
        if not 0 <= self.data_bytes < float("inf"):
            raise ValueError(f"data_bytes must be >= 0, but got {self.data_bytes}")

    # -- issue #19: epochs per batch size from the gradient noise scale ----------------------
    def known_epochs(self) -> tuple[dict[int, float], str]:
        """The known (batch size: epochs) points and what they are: the user's (``--epochs N
        --at-batch B`` and every ``--epochs-at B=N``), else the workload's published epochs to
        stabilise; none when ``--epochs`` is one number for every batch size."""
        if self.epochs is not None and self.at_batch is None:
            return {}, f"--epochs {self.epochs}"
        given = dict(self.epochs_at)
        if self.epochs is not None and self.at_batch is not None:
            given[self.at_batch] = self.epochs
        if given:
            return {b: float(e) for b, e in given.items()}, "given epochs (--epochs-at, --at-batch)"
        published = {b: float(e) for b, e in self.epochs_to_stabilise.items()}
        return published, "published epochs to stabilise (docs/method.md 2.3)"

    def epochs_anchor(self) -> EpochsAnchor | None:
        """The known point the epochs model starts from (the smallest known batch size), or
        None when the epochs are one number for every batch size (``--epochs`` alone, or no
        known figures). With exactly one known point, its probe also measures the gradient
        noise scale."""
        known, _ = self.known_epochs()
        if not known:
            return None
        ref = min(known)
        if self.epochs is not None and self.at_batch == ref:
            basis = f"--epochs {self.epochs} --at-batch {self.at_batch}"
        elif self.epochs_at:
            basis = f"--epochs-at {ref}={known[ref]:g}"
        else:
            basis = "published epochs to stabilise (docs/method.md 2.3)"
        return EpochsAnchor(ref, known[ref], "given", basis)

    def needs_noise_scale(self) -> bool:
        """Whether the epochs model needs the probe's noise scale: exactly one known point."""
        return len(self.known_epochs()[0]) == 1

    def epochs_estimate(self, batch_size: int, noise: Any = None) -> EpochsEstimate:
        """Epochs at ``batch_size`` from the model ``E(B) = E_min (1 + B/B_noise)``: with two
        or more known points ``B_noise`` is fitted to them (:mod:`advisor.probes.epochs_fit`);
        with one, it is the probe's ``noise`` (:class:`advisor.probes.gradient_noise.
        NoiseScale`); with none, the single given number."""
        known, basis = self.known_epochs()
        if len(known) >= 2:
            # The probe's noise scale, measured at the start of training, is far below the
            # one that sets the epochs and varies widely across seeds (fcn: 49-10,257 over 10
            # seeds after 8 steps; docs/benchmarks.md, issue #19): known points fit better.
            return fitted_epochs(fit_noise_scale(known), batch_size, basis)
        anchor = self.epochs_anchor()
        if anchor is not None:
            return predict_epochs(anchor, batch_size, noise)
        e = self.epochs_for(batch_size)
        basis = f"--epochs {e}" if self.epochs is not None else "the workload's default"
        return EpochsEstimate(batch_size, e, e, e, e, "given", f"{basis}, every batch size")

    def epochs_for(self, batch_size: int) -> int:
        """The run length: --epochs, else the known epochs-to-stabilise (nearest batch size)."""
        if self.epochs is not None:
            return self.epochs
        known = self.epochs_to_stabilise
        if not known:
            return self.default_epochs
        if batch_size in known:
            return known[batch_size]
        return known[min(known, key=lambda b: abs(b - batch_size))]


def default_epochs(workload: Workload, batch_size: int) -> int:
    """A built-in workload's whole epochs at ``batch_size``, as ``advisor suggest`` counts them
    (:meth:`WorkloadInfo.epochs_estimate` on its published figures): for ``advisor predict``,
    ``estimate`` and the tuning job's fixed ``epochs``."""
    info = WorkloadInfo(
        name=workload.name,
        n_train=workload.n_train,
        n_val=workload.n_val,
        epochs_to_stabilise=dict(workload.epochs_to_stabilise),
        default_epochs=workload.default_epochs,
    )
    return info.epochs_estimate(batch_size).epochs


@dataclass(frozen=True)
class Candidate:
    """One machine choice: a catalog instance type, on demand or on spot capacity."""

    instance: InstanceType
    spot: bool = False

    def __post_init__(self) -> None:
        if self.spot and self.instance.spot_usd_per_h is None:
            raise ValueError(f"{self.instance.key} has no spot price, so spot=True is invalid")

    @property
    def key(self) -> str:
        """The Optuna ``machine`` value: ``service:instance_type`` (+ ``:spot``)."""
        return self.instance.key + (SPOT_SUFFIX if self.spot else "")

    @property
    def price_per_hour(self) -> float:
        return self.instance.price(self.spot)

    @property
    def local(self) -> bool:
        return self.instance.provider == "local"


def split_machine_key(key: str) -> tuple[str, bool]:
    """``"sagemaker:ml.p3.2xlarge:spot"`` -> (``"sagemaker:ml.p3.2xlarge"``, True)."""
    if key.endswith(SPOT_SUFFIX):
        return key[: -len(SPOT_SUFFIX)], True
    return key, False


@dataclass(frozen=True)
class RunTime:
    """What a back end's hook returns: the on-demand run time of one (machine, batch)."""

    runtime: Interval | None  # seconds; None when failed
    source: str  # "measured" | "modelled" | "replayed"
    epochs: int
    probe_s: float  # predicted duration of a probe on this machine (for the probe budget)
    estimate: dict[str, Any] = field(default_factory=dict)
    phases: PhaseTimes | None = None
    probe: ProbeResult | None = None
    new_probe: bool = False
    error: str | None = None


@dataclass(frozen=True)
class Evaluation:
    """The scored candidate: run time and cost with intervals, and where they come from."""

    machine: str  # candidate key (with :spot)
    batch_size: int
    status: Literal["ok", "failed"]
    runtime: Interval | None
    cost: Interval | None
    source: str
    epochs: int
    price_per_hour: float
    spot: bool
    probe_s: float
    estimate: dict[str, Any] = field(default_factory=dict)
    phases: PhaseTimes | None = None
    probe: ProbeResult | None = None
    new_probe: bool = False
    error: str | None = None

    def __post_init__(self) -> None:
        if (self.status == "ok") != (self.runtime is not None and self.cost is not None):
            raise ValueError(
                f"{self.machine} b{self.batch_size}: a finished evaluation (status ok) has a "
                f"runtime and a cost, a failed one neither; got status={self.status!r}"
            )

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def probe_cost_usd(self) -> float:
        """What one probe of this candidate costs at its price (the probe-budget charge)."""
        from advisor.providers.pricing import usd

        return usd(self.probe_s, self.price_per_hour)


def probe_duration_s(phases: PhaseTimes, iterations: int) -> float:
    """How long a probe of ``iterations`` steps and two validation passes takes there."""
    return (
        phases.init.value
        + phases.t1.value
        + max(iterations - 1, 0) * phases.t2.value
        + phases.v1.value
        + phases.v2.value
    )


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
    return not (m.max_price is not None and instance.on_demand_usd_per_h > m.max_price)


class Backend(ABC):
    """Turns (candidate, batch size, hyperparameters) into an ``Evaluation``.

    Contract: the study calls ``candidates`` once, then ``screen`` (cheap, optional: None when
    the back end cannot predict without probing) and ``evaluate`` for each trial, from one
    thread. Public methods do the bookkeeping (spot variants, prices, spot overhead, counting
    new probes); subclasses implement ``_instances``, ``_runtime`` and optionally ``_screen``.
    """

    name = "base"

    def __init__(self) -> None:
        self.new_probes = 0
        self.evaluations = 0
        # time.monotonic() by which the search must end (--timeout): a back end that runs
        # probes shortens their time-outs to it.
        self.deadline: float | None = None

    @property
    def snapshot(self) -> str:
        """The catalog snapshot (or table id) whose prices this back end uses."""
        return "unknown"

    def candidates(self, space: JointSpace) -> list[Candidate]:
        """Machines of the space, each on demand and (when allowed and sold) on spot."""
        catalog = getattr(self, "catalog", None)  # native spellings resolve (issue #15)
        check_instance_types(
            space.machines.instance_types,
            self._instances(MachineFilter()),
            getattr(catalog, "matching_keys", None),
        )
        out: list[Candidate] = []
        for inst in self._instances(space.machines):
            out.append(Candidate(inst))
            if space.machines.spot and inst.spot_usd_per_h is not None and inst.provider != "local":
                out.append(Candidate(inst, spot=True))
        return out

    def evaluate(
        self, workload: WorkloadInfo, candidate: Candidate, batch_size: int, hps: dict[str, Any]
    ) -> Evaluation:
        """Score a candidate (may run a probe); failures come back as status "failed"."""
        rt = self._runtime(workload, candidate.instance, batch_size, hps)
        self.evaluations += 1
        self.new_probes += int(rt.new_probe)
        return self._finish(candidate, batch_size, rt, workload)

    def screen(
        self, workload: WorkloadInfo, candidate: Candidate, batch_size: int, hps: dict[str, Any]
    ) -> Evaluation | None:
        """A cheap prediction used to order the search, or None if unavailable."""
        rt = self._screen(workload, candidate.instance, batch_size, hps)
        if rt is None:
            return None
        self.new_probes += int(rt.new_probe)
        return self._finish(candidate, batch_size, rt, workload)

    def _finish(
        self,
        candidate: Candidate,
        batch_size: int,
        rt: RunTime,
        workload: WorkloadInfo | None = None,
    ) -> Evaluation:
        """Price the run (the job: start-up overheads + training; issue #14)."""
        from advisor.probes.iteration_model import priced
        from advisor.providers.overheads import run_overheads

        price = candidate.price_per_hour
        runtime = cost = None
        estimate = dict(rt.estimate)
        if rt.runtime is not None:
            data = (workload.data_bytes, workload.data_basis) if workload else (0.0, "")
            over = run_overheads(candidate.instance, *data)
            runtime, cost, notes = priced(
                rt.runtime,
                price,
                spot=candidate.spot,
                service=candidate.instance.service,
                overheads=over,
            )
            estimate.update(notes)
        return Evaluation(
            machine=candidate.key,
            batch_size=batch_size,
            status="ok" if runtime is not None else "failed",
            runtime=runtime,
            cost=cost,
            source=rt.source,
            epochs=rt.epochs,
            price_per_hour=price,
            spot=candidate.spot,
            probe_s=rt.probe_s,
            estimate=estimate,
            phases=rt.phases,
            probe=rt.probe,
            new_probe=rt.new_probe,
            error=rt.error,
        )

    @abstractmethod
    def _instances(self, machines: MachineFilter) -> Sequence[InstanceType]:
        """The instance types matching the filter."""

    @abstractmethod
    def _runtime(
        self, workload: WorkloadInfo, instance: InstanceType, batch_size: int, hps: dict[str, Any]
    ) -> RunTime:
        """The on-demand run time of one (machine, batch); never raises for probe failures."""

    def _screen(
        self, workload: WorkloadInfo, instance: InstanceType, batch_size: int, hps: dict[str, Any]
    ) -> RunTime | None:
        return None
