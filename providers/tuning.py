"""The provider-neutral managed tuning spec and the back-end contract.

A ``TuningSpec`` says what a managed hyperparameter tuning job runs (entry point, image, one
machine type and count, the fixed values the advisor chose) and what it tunes (the remaining
hyperparameters, objective, budget). ``TuningBackend`` turns a spec into one cloud's exact
request and submits it; SageMaker, Vertex AI and Azure ML differ only in a few private hooks.
Cloud SDKs are imported inside the back ends, never here.
"""

from __future__ import annotations

import math
import re
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from advisor.search_spaces.space import (
    FloatParam,
    IntParam,
    Param,
    space_from_dict,
)

from advisor.errors import AdvisorError

if TYPE_CHECKING:
    import optuna
    from advisor.providers.catalog._types import InstanceType

Goal = Literal["maximize", "minimize"]
Strategy = Literal["bayesian", "random", "grid", "hyperband"]
STRATEGIES: tuple[str, ...] = ("bayesian", "random", "grid", "hyperband")
TrialStatus = Literal["completed", "failed", "stopped", "running", "pending"]

ENTRY_POINT: tuple[str, ...] = ("python", "-m", "advisor.train")
DEFAULT_METRIC = "val_accuracy"
# What ``advisor.train`` prints after each epoch; SageMaker's metric regex reads it.
METRIC_LINE = "advisor-metric: {name}={value:.6g};"
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def metric_regex(name: str) -> str:
    """The regex (one capture group) that reads metric ``name`` from ``METRIC_LINE`` output."""
    return rf"advisor-metric: {re.escape(name)}=([-+0-9.eEinfa]+);"


@dataclass(frozen=True)
class TuningSpec:
    """One managed hyperparameter tuning job, independent of the cloud that runs it.

    ``instance_type`` is in the target service's own terms (``ml.p3.2xlarge`` for SageMaker,
    ``n1-standard-8`` for Vertex, the VM size for Azure ML); ``accelerator`` (catalog name,
    e.g. ``V100``) and ``accelerator_count`` come from the catalog row. ``fixed`` holds the
    values every trial gets (model, batch size, epochs and hyperparameters not tuned);
    ``hyperparameters`` are tuned. ``max_runtime_s`` bounds each training job.
    """

    job_name: str
    workload: str
    image: str
    instance_type: str
    hyperparameters: tuple[Param, ...]
    fixed: Mapping[str, Any] = field(default_factory=dict)
    command: tuple[str, ...] = ENTRY_POINT
    instance_count: int = 1
    accelerator: str | None = None
    accelerator_count: int = 0
    objective_metric: str = DEFAULT_METRIC
    goal: Goal = "maximize"
    max_trials: int = 20
    parallel_trials: int = 2
    early_stopping: bool = False
    strategy: Strategy = "bayesian"
    max_runtime_s: int = 24 * 3600
    output: str | None = None
    spot: bool = False
    alternative_instance_types: tuple[str, ...] = ()
    machine_key: str | None = None
    price_per_hour: float | None = None
    notes: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.job_name:
            raise ValueError("job_name must not be empty")
        if not self.image:
            raise ValueError("image must not be empty (the container that holds the package)")
        if not self.instance_type:
            raise ValueError("instance_type must not be empty")
        if self.instance_count < 1:
            raise ValueError(f"instance_count must be >= 1, but got {self.instance_count}")
        if (self.accelerator is None) != (self.accelerator_count == 0):
            raise ValueError(
                "accelerator and accelerator_count must agree, but got "
                f"accelerator={self.accelerator!r}, accelerator_count={self.accelerator_count}"
            )
        if self.goal not in ("maximize", "minimize"):
            raise ValueError(f"goal must be 'maximize' or 'minimize', but got {self.goal!r}")
        if self.strategy not in STRATEGIES:
            raise ValueError(f"strategy must be one of {STRATEGIES}, but got {self.strategy!r}")
        if self.max_trials < 1:
            raise ValueError(f"max_trials must be >= 1, but got {self.max_trials}")
        if not 1 <= self.parallel_trials <= self.max_trials:
            raise ValueError(
                "1 <= parallel_trials <= max_trials must hold, but got "
                f"parallel_trials={self.parallel_trials}, max_trials={self.max_trials}"
            )
        if self.max_runtime_s <= 0:
            raise ValueError(f"max_runtime_s must be > 0, but got {self.max_runtime_s}")
        if not self.hyperparameters:
            raise ValueError("hyperparameters must not be empty: there is nothing to tune")
        names = [p.name for p in self.hyperparameters]
        bad = [n for n in names if not _NAME.match(n)]
        if bad:
            raise ValueError(f"hyperparameter names must be identifiers, but got {bad}")
        if len(set(names)) != len(names):
            raise ValueError(f"hyperparameter names must be unique, but got {names}")
        both = sorted(set(names) & set(self.fixed))
        if both:
            raise ValueError(f"{both} are both tuned and fixed")
        if not _NAME.match(self.objective_metric):
            raise ValueError(
                f"objective_metric must be an identifier, but got {self.objective_metric!r}"
            )

    @property
    def epochs(self) -> int | None:
        value = self.fixed.get("epochs")
        return int(value) if value is not None else None

    def entry_args(self) -> list[str]:
        """The fixed command-line arguments of the entry point (``--batch-size 512`` ...)."""
        args: list[str] = []
        for name, value in self.fixed.items():
            args += [f"--{name.replace('_', '-')}", str(value)]
        args += ["--metric", self.objective_metric]
        return args

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["fixed"] = dict(self.fixed)
        return out


@dataclass(frozen=True)
class TrialResult:
    """One finished (or running) training job of a managed tuning job."""

    job_name: str
    status: TrialStatus
    hyperparameters: dict[str, Any]
    metric_name: str
    metric: float | None = None
    runtime_s: float | None = None  # wall time the job trained
    billable_s: float | None = None  # what the service billed (spot jobs bill less)
    instance_type: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Submission:
    """What ``TuningBackend.submit`` did: the job id, who submitted it and the exact request."""

    provider: str
    job_id: str
    identity: str
    request: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class TuningBackend(ABC):
    """One cloud's managed tuning service.

    Contract: ``build_request(spec)`` first checks the spec against the service's limits
    (``_refusals``) and raises an ``AdvisorError`` naming the fix for the first one, so a job
    the service would reject never leaves the machine; it then returns the exact request body
    (plain JSON data). ``submit`` sends that same request with the injected or lazily built SDK
    client and returns a ``Submission`` saying which identity/project/workspace was used (never
    a secret). ``status(job)`` and ``results(job)`` read the job back. Sub-classes implement the
    private hooks; nothing here imports a cloud SDK.
    """

    name: ClassVar[str]
    services: ClassVar[tuple[str, ...]]  # catalog services whose machine types it can run
    strategies: ClassVar[tuple[str, ...]]
    max_parallel: ClassVar[int | None] = None

    # -- public lifecycle -------------------------------------------------------------------
    def check(self, spec: TuningSpec) -> None:
        """Raise ``AdvisorError`` if the service cannot run ``spec`` as written."""
        if spec.strategy not in self.strategies:
            raise AdvisorError(
                f"{self.label} does not offer the '{spec.strategy}' search strategy.",
                f"use --strategy {' or '.join(self.strategies)}.",
            )
        if self.max_parallel is not None and spec.parallel_trials > self.max_parallel:
            raise AdvisorError(
                f"{self.label} runs at most {self.max_parallel} trials in parallel, "
                f"but {spec.parallel_trials} were asked for.",
                f"use --parallel {self.max_parallel} or less (or raise the service quota first).",
            )
        for problem, fix in self._refusals(spec):
            raise AdvisorError(problem, fix)

    def build_request(self, spec: TuningSpec) -> dict[str, Any]:
        """The exact request the service receives for ``spec`` (checked first)."""
        self.check(spec)
        return self._build(spec)

    def submit(self, spec: TuningSpec) -> Submission:
        """Submit ``spec`` with this environment's credentials."""
        request = self.build_request(spec)
        identity = self.identity()
        job_id = self._submit(spec, request)
        return Submission(self.name, job_id, identity, request)

    def status(self, job: str) -> dict[str, Any]:
        """The job's state and trial counts, as plain data."""
        return self._status(job)

    def results(self, job: str) -> list[TrialResult]:
        """Every training job the tuning job started, with its hyperparameters and metric."""
        return self._results(job)

    @property
    def label(self) -> str:
        return {"sagemaker": "SageMaker", "vertex": "Vertex AI", "azureml": "Azure ML"}.get(
            self.name, self.name
        )

    @classmethod
    def machine_type(cls, key: str, instance: InstanceType | None) -> str:
        """This service's machine type for catalog ``key`` (``service:type[:spot]``)."""
        service, itype, _ = split_machine_key(key)
        if service not in cls.services:
            raise AdvisorError(
                f"Machine '{key}' is not one of {cls.name}'s machine types (service '{service}').",
                f"pick one with --instance, or submit to the cloud that sells it "
                f"({_provider_for(service)}).",
            )
        return cls._map_type(service, itype)

    def default_strategy(self, params: Iterable[Param]) -> tuple[str, str | None]:
        """The strategy to use when none is given, and a note saying why if not Bayesian."""
        return "bayesian", None

    # -- hooks ------------------------------------------------------------------------------
    @classmethod
    def _map_type(cls, service: str, instance_type: str) -> str:
        return instance_type

    def _refusals(self, spec: TuningSpec) -> Iterable[tuple[str, str]]:
        """Yield (problem, fix) for what the service cannot do with ``spec``."""
        return ()

    @abstractmethod
    def _build(self, spec: TuningSpec) -> dict[str, Any]: ...

    @abstractmethod
    def identity(self) -> str:
        """Who/where the job is submitted as (account ARN, project, workspace): no secrets."""

    @abstractmethod
    def _submit(self, spec: TuningSpec, request: dict[str, Any]) -> str: ...

    @abstractmethod
    def _status(self, job: str) -> dict[str, Any]: ...

    @abstractmethod
    def _results(self, job: str) -> list[TrialResult]: ...


# -- helpers shared by the back ends ---------------------------------------------------------


def split_machine_key(key: str) -> tuple[str, str, bool]:
    """``"sagemaker:ml.p3.2xlarge:spot"`` -> ``("sagemaker", "ml.p3.2xlarge", True)``."""
    parts = key.split(":")
    spot = parts[-1] == "spot"
    if spot:
        parts = parts[:-1]
    if len(parts) != 2 or not all(parts):
        raise AdvisorError(
            f"'{key}' is not a machine key.",
            "write it as service:instance_type, e.g. sagemaker:ml.p3.2xlarge.",
        )
    return parts[0], parts[1], spot


def _provider_for(service: str) -> str:
    return {
        "ec2": "--provider sagemaker",
        "sagemaker": "--provider sagemaker",
        "compute-engine": "--provider vertex",
        "vertex": "--provider vertex",
        "azure-vm": "--provider azureml",
        "azure-ml": "--provider azureml",
        "local": "run it here with `python -m advisor.train`",
    }.get(service, "another provider")


def coerce(param: Param, value: Any) -> Any:
    """A value a service returned (often a string) as the parameter's own type."""
    if isinstance(param, FloatParam):
        return float(value)
    if isinstance(param, IntParam):
        return round(float(value))
    for choice in param.choices:
        if choice == value or str(choice) == str(value):
            return choice
    raise ValueError(f"{param.name}: {value!r} is not one of {param.choices}")


def int_choices(param: IntParam, limit: int = 64) -> list[int] | None:
    """All values of an integer range when there are at most ``limit`` of them."""
    if param.high - param.low + 1 > limit:
        return None
    return list(range(param.low, param.high + 1))


def log_bounds(param: FloatParam | IntParam) -> tuple[float, float]:
    """Natural-log bounds of a log-scaled range."""
    return math.log(param.low), math.log(param.high)


def job_name(workload: str, stamp: str, max_len: int = 32) -> str:
    """A service-safe job name: ``advisor-<workload>-<stamp>``, letters, digits and '-'."""
    base = re.sub(r"[^A-Za-z0-9-]+", "-", f"advisor-{workload}").strip("-")
    tail = f"-{stamp}"
    return (base[: max_len - len(tail)].rstrip("-") + tail)[:max_len]


# -- building a spec from an advisor study ---------------------------------------------------


def recommended_trial(
    study: optuna.study.Study, services: Sequence[str] | None = None
) -> optuna.trial.FrozenTrial:
    """The study's recommended trial (``advisor.study.recommended_trial``), optionally among
    the machines of ``services`` only."""
    from advisor.study import recommended_trial as pick

    return pick(study, services)


def spec_from_study(
    study: optuna.study.Study,
    provider: str,
    *,
    image: str,
    catalog: Any = None,
    tune: Iterable[str] | None = None,
    instance: str | None = None,
    **options: Any,
) -> TuningSpec:
    """A spec that tunes the study's hyperparameters on its recommended machine and batch size.

    The machine and batch size are fixed to the recommended trial's; so are hyperparameters
    marked ``affects_runtime`` (the time and cost estimate holds only for them), unless named
    in ``tune``. ``instance`` overrides the machine. ``options`` go to ``TuningSpec``.
    """
    from advisor.providers.registry import backend_class

    attrs = study.user_attrs
    missing = [k for k in ("workload", "space") if k not in attrs]
    if missing:
        raise AdvisorError(
            f"Study '{study.study_name}' is not an advisor study (no {', '.join(missing)}).",
            "pass a study made by `advisor suggest`, or use --instance with --model.",
        )
    space = space_from_dict(attrs["space"])
    cls = backend_class(provider)
    trial = recommended_trial(study)
    notes: list[str] = []
    if instance is None and split_machine_key(str(trial.params["machine"]))[0] not in cls.services:
        overall = trial.params["machine"]
        try:
            trial = recommended_trial(study, cls.services)
        except AdvisorError:
            raise AdvisorError(
                f"Study '{study.study_name}' recommends {overall} and has no feasible trial on a "
                f"{cls.name} machine.",
                f"submit with --provider {_provider_for(split_machine_key(overall)[0])}, or pass "
                f"--instance with a {cls.name} machine type.",
            ) from None
        notes.append(
            f"the study recommends {overall}, which {cls.name} does not run; this is the study's "
            f"best {cls.name} machine ({trial.params['machine']})"
        )
    key = instance or str(trial.params.get("machine", ""))
    batch = trial.params.get("batch_size")
    fixed: dict[str, Any] = {"model": attrs["workload"]}
    if batch is not None:
        fixed["batch_size"] = int(batch)
    estimate = trial.user_attrs.get("estimate") or {}
    epochs = trial.user_attrs.get("epochs") or estimate.get("epochs") or attrs.get("epochs")
    if epochs:
        fixed["epochs"] = int(epochs)
    wanted = set(tune) if tune is not None else None
    tuned: list[Param] = []
    for p in space.hyperparameters:
        free = p.name in wanted if wanted is not None else not p.affects_runtime
        if free:
            if p.condition is not None:
                notes.append(f"{p.name} is tuned unconditionally (the services have no conditions)")
            tuned.append(p)
        elif p.name in trial.params:
            fixed[p.name] = trial.params[p.name]
    if wanted is not None:
        unknown = wanted - {p.name for p in space.hyperparameters}
        if unknown:
            raise AdvisorError(
                f"--tune names {sorted(unknown)}, which the study's space does not have.",
                f"use some of: {', '.join(p.name for p in space.hyperparameters)}.",
            )
    return spec_for_machine(
        provider,
        key,
        workload=attrs["workload"],
        hyperparameters=tuple(tuned),
        fixed=fixed,
        image=image,
        catalog=catalog,
        price_per_hour=trial.user_attrs.get("price_per_hour"),
        notes=tuple(notes),
        backend=cls,
        **options,
    )


def spec_for_machine(
    provider: str,
    machine: str,
    *,
    workload: str,
    hyperparameters: tuple[Param, ...],
    fixed: Mapping[str, Any],
    image: str,
    catalog: Any = None,
    backend: type[TuningBackend] | None = None,
    **options: Any,
) -> TuningSpec:
    """A spec on one machine, given as a catalog key or as the service's own type name."""
    from advisor.providers.registry import backend_class

    cls = backend or backend_class(provider)
    key = machine if ":" in machine else f"{cls.services[0]}:{machine}"
    service, itype, spot = split_machine_key(key)
    if service == "local":
        raise AdvisorError(
            "The recommended machine is this local machine, which no managed service runs.",
            "pass --instance with a cloud machine type (see `advisor catalog`).",
        )
    row = _catalog_row(key, catalog)
    accelerator = row.accelerator if row is not None else None
    count = row.accelerator_count if row is not None else 0
    stamp = options.pop("stamp", None) or _stamp()
    options.setdefault("spot", spot)
    if options.get("price_per_hour") is None and row is not None:
        options["price_per_hour"] = row.price(spot=spot and row.spot_usd_per_h is not None)
    return TuningSpec(
        job_name=options.pop("job_name", None) or job_name(workload, stamp),
        workload=workload,
        image=image,
        instance_type=cls.machine_type(key, row),
        hyperparameters=hyperparameters,
        fixed=dict(fixed),
        accelerator=accelerator,
        accelerator_count=count,
        machine_key=f"{service}:{itype}" + (":spot" if spot else ""),
        **options,
    )


def _catalog_row(key: str, catalog: Any) -> InstanceType | None:
    """The catalog row of ``key`` (without ``:spot``), or None when no catalog is available."""
    service, itype, _ = split_machine_key(key)
    if catalog is None:
        try:
            from advisor.providers.catalog import load
        except ImportError:
            return None
        catalog = load()
    try:
        return catalog.get(f"{service}:{itype}")
    except AdvisorError:
        if service == "sagemaker" and itype.startswith("ml."):
            # SageMaker rows may be missing; the EC2 row has the same hardware.
            try:
                return catalog.get(f"ec2:{itype[3:]}")
            except AdvisorError:
                return None
        raise


def _stamp() -> str:
    import time

    return time.strftime("%m%d-%H%M%S")


# -- bringing managed trials back into the study ---------------------------------------------


def import_results(
    study: optuna.study.Study,
    results: Iterable[TrialResult],
    provider: str,
    job: str,
) -> list[int]:
    """Add each finished managed trial to ``study`` (``study.add_trial``); return their numbers.

    A trial gets the recommended trial's machine and batch size plus the hyperparameters the
    service chose (typed to the study's distributions), and the study's objectives measured by
    the service: ``runtime_s`` is the training job's run time, ``cost_usd`` that time at the
    recommended trial's ``price_per_hour``, and a metric named like the managed objective takes
    its value. User attributes keep the provider, tuning job, training job and managed metric.
    Jobs already imported are skipped; failed or metric-less jobs are added as FAIL trials.
    """
    import optuna
    from advisor.search_spaces.convert import param_to_optuna
    from optuna.distributions import CategoricalDistribution

    base = recommended_trial(study)
    space = space_from_dict(study.user_attrs["space"]) if "space" in study.user_attrs else None
    names = list(study.metric_names or ["runtime_s", "cost_usd"][: len(study.directions)])
    price = base.user_attrs.get("price_per_hour")
    done = {t.user_attrs.get("managed_job") for t in study.get_trials(deepcopy=False)}
    added = []
    for r in results:
        if r.job_name in done or r.status in ("running", "pending"):
            continue
        params = dict(base.params)
        dists = dict(base.distributions)
        for name, value in r.hyperparameters.items():
            dist = dists.get(name)
            if dist is None and space is not None:
                try:
                    dist = param_to_optuna(space.param(name))
                except KeyError:
                    continue
            if dist is None:
                continue
            if isinstance(dist, CategoricalDistribution):
                matches = [c for c in dist.choices if c == value or str(c) == str(value)]
                if not matches:
                    continue
                params[name] = matches[0]
            else:
                value = float(value)
                is_int = isinstance(dist, optuna.distributions.IntDistribution)
                params[name] = round(value) if is_int else value
            dists[name] = dist
        cost = r.runtime_s * price / 3600 if r.runtime_s is not None and price is not None else None
        measured = {"runtime_s": r.runtime_s, "cost_usd": cost, r.metric_name: r.metric}
        values = [measured.get(n) for n in names]
        ok = r.status == "completed" and r.metric is not None and None not in values
        attrs: dict[str, Any] = {
            "source": "managed",
            "provider": provider,
            "tuning_job": job,
            "managed_job": r.job_name,
            "managed_metric": {"name": r.metric_name, "value": r.metric},
            "managed_status": r.status,
            "instance_type": r.instance_type,
            "billable_s": r.billable_s,
            "price_per_hour": price,
            "epochs": base.user_attrs.get("epochs"),
        }
        if r.runtime_s is not None:
            attrs["runtime_s"] = {"value": r.runtime_s, "low": r.runtime_s, "high": r.runtime_s}
        if cost is not None:
            attrs["cost_usd"] = {"value": cost, "low": cost, "high": cost}
        try:
            trial = optuna.trial.create_trial(
                params=params,
                distributions=dists,
                values=[float(v) for v in values] if ok else None,  # type: ignore[arg-type]
                state=optuna.trial.TrialState.COMPLETE if ok else optuna.trial.TrialState.FAIL,
                user_attrs=attrs,
            )
        except ValueError as exc:
            raise AdvisorError(
                f"{r.job_name} does not fit study '{study.study_name}': {exc}",
                "import into the study the job was submitted from.",
            ) from exc
        study.add_trial(trial)
        added.append(study.trials[-1].number)
    return added
