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

Spot capacity: a run on spot/preemptible capacity pays interruptions (checkpoint, lost work,
restart). We add ``SPOT_RESTART_OVERHEAD`` (10 %) to the expected runtime and widen the upper
bound by ``SPOT_RESTART_OVERHEAD_HIGH`` (30 %); the cost uses the spot price.
"""

from __future__ import annotations

import json
import os
import platform
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal

from advisor.probes.epochs_model import EpochsAnchor, EpochsEstimate, predict_epochs
from advisor.probes.result import Interval, PhaseTimes, ProbeRequest, ProbeResult
from advisor.providers.catalog._types import InstanceType
from advisor.search_spaces.space import JointSpace, MachineFilter

if TYPE_CHECKING:
    from optuna.storages import BaseStorage

SPOT_SUFFIX = ":spot"
SPOT_RESTART_OVERHEAD = 0.10
SPOT_RESTART_OVERHEAD_HIGH = 0.30
PROBE_CACHE_STUDY = "advisor-probe-cache"


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

    def __post_init__(self) -> None:
        if self.n_train <= 0:
            raise ValueError(f"n_train must be > 0, but got {self.n_train}")
        if self.n_val < 0:
            raise ValueError(f"n_val must be >= 0, but got {self.n_val}")
        if self.epochs is not None and self.epochs <= 0:
            raise ValueError(f"epochs must be > 0, but got {self.epochs}")
        if self.at_batch is not None and (self.at_batch <= 0 or self.epochs is None):
            raise ValueError(f"at_batch needs epochs and must be > 0, got {self.at_batch}")

    # -- issue #19: epochs per batch size from the gradient noise scale ----------------------
    def epochs_anchor(self) -> EpochsAnchor | None:
        """The known point the epochs model starts from: ``--epochs N --at-batch B``, else the
        published epochs to stabilise at the smallest published batch size; None when the
        epochs are one number for every batch size (``--epochs`` alone, or no figures)."""
        if self.epochs is not None:
            if self.at_batch is None:
                return None
            basis = f"--epochs {self.epochs} --at-batch {self.at_batch}"
            return EpochsAnchor(self.at_batch, self.epochs, "given", basis)
        if not self.epochs_to_stabilise:
            return None
        ref = min(self.epochs_to_stabilise)
        basis = "published epochs to stabilise (METHOD.md 2.3)"
        return EpochsAnchor(ref, self.epochs_to_stabilise[ref], "given", basis)

    def epochs_estimate(self, batch_size: int, noise: Any = None) -> EpochsEstimate:
        """Epochs at ``batch_size``: the anchor scaled by the noise scale ``noise``
        (:class:`advisor.probes.gradient_noise.NoiseScale`), or the single given number."""
        anchor = self.epochs_anchor()
        published = self.epochs is None and batch_size in self.epochs_to_stabilise
        if anchor is not None and (noise is not None or not published):
            return predict_epochs(anchor, batch_size, noise)
        e = self.epochs_for(batch_size)
        if published:
            return EpochsEstimate(
                batch_size, e, e, e, e, "given", "published epochs to stabilise (METHOD.md 2.3)"
            )
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

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def probe_cost_usd(self) -> float:
        """What one probe of this candidate costs at its price (the probe-budget charge)."""
        return self.probe_s * self.price_per_hour / 3600.0


def probe_duration_s(phases: PhaseTimes, iterations: int) -> float:
    """How long a probe of ``iterations`` steps and two validation passes takes there."""
    return (
        phases.init.value
        + phases.t1.value
        + max(iterations - 1, 0) * phases.t2.value
        + phases.v1.value
        + phases.v2.value
    )


def with_spot(runtime: Interval, spot: bool) -> Interval:
    """Add the spot restart overhead (expected +10 %, upper bound +30 %)."""
    if not spot:
        return runtime
    return Interval(
        runtime.value * (1 + SPOT_RESTART_OVERHEAD),
        runtime.low,
        runtime.high * (1 + SPOT_RESTART_OVERHEAD_HIGH),
    )


def phases_from_dict(data: dict[str, Any]) -> PhaseTimes:
    """Rebuild PhaseTimes from ``PhaseTimes.to_dict()``."""

    def iv(d: dict[str, float]) -> Interval:
        return Interval(d["value"], d["low"], d["high"])

    return PhaseTimes(
        init=iv(data["init"]),
        t1=iv(data["t1"]),
        t2=iv(data["t2"]),
        v1=iv(data["v1"]),
        v2=iv(data["v2"]),
        source=data.get("source", "measured"),
        note=data.get("note", ""),
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

    @property
    def snapshot(self) -> str:
        """The catalog snapshot (or table id) whose prices this back end uses."""
        return "unknown"

    def candidates(self, space: JointSpace) -> list[Candidate]:
        """Machines of the space, each on demand and (when allowed and sold) on spot."""
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
        return self._finish(candidate, batch_size, rt)

    def screen(
        self, workload: WorkloadInfo, candidate: Candidate, batch_size: int, hps: dict[str, Any]
    ) -> Evaluation | None:
        """A cheap prediction used to order the search, or None if unavailable."""
        rt = self._screen(workload, candidate.instance, batch_size, hps)
        if rt is None:
            return None
        self.new_probes += int(rt.new_probe)
        return self._finish(candidate, batch_size, rt)

    def _finish(self, candidate: Candidate, batch_size: int, rt: RunTime) -> Evaluation:
        price = candidate.price_per_hour
        runtime = cost = None
        if rt.runtime is not None:
            runtime = with_spot(rt.runtime, candidate.spot)
            cost = runtime.scale(price / 3600.0)
        estimate = dict(rt.estimate)
        if candidate.spot and runtime is not None:
            estimate["spot_restart_overhead"] = {
                "expected": SPOT_RESTART_OVERHEAD,
                "high": SPOT_RESTART_OVERHEAD_HIGH,
            }
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


class ProbeCache:
    """Probe results kept in the study storage (works with any Optuna storage URL).

    They live as user attributes of a dedicated study named ``advisor-probe-cache``: key ->
    ``ProbeResult.to_dict()``. A failed probe is cached when the failure is a property of the
    configuration (out of memory, NaN loss); crashes and timeouts are retried next time.
    """

    def __init__(self, storage: str | BaseStorage) -> None:
        import optuna

        self._storage = optuna.storages.get_storage(storage)
        study = optuna.create_study(
            study_name=PROBE_CACHE_STUDY, storage=self._storage, load_if_exists=True
        )
        self._study_id = study._study_id
        self._memo: dict[str, ProbeResult] = {}

    def get(self, key: str) -> ProbeResult | None:
        if key in self._memo:
            return self._memo[key]
        attrs = self._storage.get_study_user_attrs(self._study_id)
        if key not in attrs:
            return None
        probe = ProbeResult.from_dict(attrs[key])
        self._memo[key] = probe
        return probe

    def put(self, key: str, probe: ProbeResult) -> None:
        if probe.status in ("error", "timeout"):
            return
        self._storage.set_study_user_attr(self._study_id, key, probe.to_dict())
        self._memo[key] = probe

    def keys(self) -> list[str]:
        return list(self._storage.get_study_user_attrs(self._study_id))


def machine_fingerprint(threads: int) -> str:
    """Identifies this machine and thread count in probe-cache keys."""
    return f"{platform.node()}/{platform.machine()}/{os.cpu_count()}cpu/{threads}t"


def probe_cache_key(
    workload: WorkloadInfo,
    batch_size: int,
    threads: int,
    iterations: int,
    runtime_hps: dict[str, Any],
    noise: bool = False,
) -> str:
    hp = json.dumps(runtime_hps, sort_keys=True) if runtime_hps else ""
    return (
        f"{workload.name}|{workload.framework}|b{batch_size}|{machine_fingerprint(threads)}"
        f"|k{iterations}|{hp}" + ("|gns" if noise else "")  # issue #19: with the noise scale
    )


RunProbe = Callable[[ProbeRequest], ProbeResult]
PredictPhases = Callable[[ProbeResult, InstanceType, Any, int], PhaseTimes]


class LocalBackend(Backend):
    """Real probes on this machine + the performance model for catalog machines.

    ``run_probe`` and ``predict_phases`` are injectable (tests pass fakes); by default they
    are ``advisor.probes.runner.run_probe`` and
    ``advisor.probes.perf.model.predict_phases``.
    """

    name = "local"

    def __init__(
        self,
        storage: str | BaseStorage,
        snapshot: str | None = None,
        *,
        iterations: int = 8,
        max_probe_s: float | None = 4.0,
        threads: int | None = None,
        timeout_s: float = 120.0,
        runtime_params: Sequence[str] = (),
        run_probe: RunProbe | None = None,
        predict_phases: PredictPhases | None = None,
        catalog: Any = None,
        on_probe: Callable[[str], None] | None = None,
    ) -> None:
        super().__init__()
        if catalog is None:
            from advisor.providers import catalog as catalog_mod

            catalog = catalog_mod.load(snapshot)
        self.catalog = catalog
        self.cache = ProbeCache(storage)
        self.iterations = iterations
        self.max_probe_s = max_probe_s  # time box of a probe's iterations (at least 5 run)
        self.threads = threads or _default_threads()
        self.timeout_s = timeout_s
        self.runtime_params = tuple(runtime_params)
        self._run_probe = run_probe
        self._predict = predict_phases
        self._on_probe = on_probe

    @property
    def snapshot(self) -> str:
        return str(self.catalog.snapshot)

    def _instances(self, machines: MachineFilter) -> list[InstanceType]:
        found = self.catalog.filter(  # the catalog knows accelerator aliases (v100, tpu, cpu)
            providers=tuple(p for p in machines.providers if p != "local"),
            services=tuple(s for s in machines.services if s != "local"),
            accelerators=machines.accelerators,
            min_gpus=machines.min_gpus,
            max_gpus=machines.max_gpus,
            max_price=machines.max_price,
        )
        rest = replace(machines, accelerators=())
        out = [i for i in found if i.provider != "local" and matches(i, rest)]
        if machines.include_local:
            from advisor.providers.catalog import local_machine

            local = local_machine()
            if matches(local, _local_filter(machines)):
                out.append(local)
        return out

    def probe(
        self, workload: WorkloadInfo, batch_size: int, hps: dict[str, Any], noise: bool = False
    ) -> tuple[ProbeResult, bool]:
        """The local probe for (workload, batch[, runtime hps]): cached, else run now.
        ``noise``: also measure the gradient noise scale (issue #19; the reference probe)."""
        rt_hps = {k: hps[k] for k in self.runtime_params if k in hps}
        key = probe_cache_key(workload, batch_size, self.threads, self.iterations, rt_hps, noise)
        cached = self.cache.get(key)
        if cached is not None:
            return cached, False
        if self._on_probe is not None:
            self._on_probe(f"probing {workload.name} at batch {batch_size} on this machine")
        from advisor.probes.runner import run_probe

        run = self._run_probe or run_probe
        request = ProbeRequest(
            workload=workload.name,
            batch_size=batch_size,
            framework=workload.framework,
            iterations=self.iterations,
            threads=self.threads,
            hyperparameters=rt_hps,
            timeout_s=self.timeout_s,
            max_seconds=self.max_probe_s,
            gradient_noise=noise,
        )
        probe = run(request)
        self.cache.put(key, probe)
        return probe, True

    def _runtime(
        self, workload: WorkloadInfo, instance: InstanceType, batch_size: int, hps: dict[str, Any]
    ) -> RunTime:
        from advisor.probes.iteration_model import estimate, phase_times

        anchor = workload.epochs_anchor()  # issue #19: the anchor's probe measures the noise
        is_ref = anchor is not None and anchor.batch_size == batch_size
        probe, new = self.probe(workload, batch_size, hps, noise=is_ref)
        epochs_est, new_ref = self._epochs(workload, batch_size, hps)
        epochs, new = epochs_est.epochs, new or new_ref
        if not probe.ok:
            return RunTime(
                None,
                "measured",
                epochs,
                probe.wall_s,
                probe=probe,
                new_probe=new,
                error=f"probe {probe.status}: {probe.error or 'no detail'}",
            )
        try:
            if instance.provider == "local":
                phases = phase_times(probe, workload.n_train, workload.n_val)
            else:
                from advisor.probes.perf.model import predict_phases

                predict = self._predict or predict_phases
                phases = predict(probe, instance, self.catalog, batch_size)
            est = estimate(phases, workload.n_train, workload.n_val, epochs, batch_size)
        except (ValueError, ArithmeticError) as exc:
            return RunTime(
                None, "modelled", epochs, 0.0, probe=probe, new_probe=new, error=str(exc)
            )
        return RunTime(
            runtime=est.runtime,
            source=phases.source,
            epochs=epochs,
            probe_s=probe_duration_s(phases, self.iterations),
            estimate={**est.to_dict(), "epochs_model": epochs_est.to_dict()},
            phases=phases,
            probe=probe,
            new_probe=new,
        )

    def _epochs(
        self, workload: WorkloadInfo, batch_size: int, hps: dict[str, Any]
    ) -> tuple[EpochsEstimate, bool]:
        """Issue #19: epochs at ``batch_size`` from the gradient noise scale of one probe, at
        the anchor's batch size (cached like every probe); returns (estimate, new probe)."""
        from advisor.probes.gradient_noise import from_probe

        anchor = workload.epochs_anchor()
        if anchor is None:
            return workload.epochs_estimate(batch_size), False
        ref, new = self.probe(workload, anchor.batch_size, hps, noise=True)
        return workload.epochs_estimate(batch_size, from_probe(ref) if ref.ok else None), new

    def _screen(
        self, workload: WorkloadInfo, instance: InstanceType, batch_size: int, hps: dict[str, Any]
    ) -> RunTime | None:
        # The model is the cheap part: one local probe per batch size, then arithmetic.
        return self._runtime(workload, instance, batch_size, hps)


def _local_filter(machines: MachineFilter) -> MachineFilter:
    """The local machine ignores provider/service/price limits (it is always 'yours')."""
    return MachineFilter(accelerators=machines.accelerators, spot=False)


def _default_threads() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1
