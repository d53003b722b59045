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
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from advisor.providers import registry
from advisor.providers.catalog import MachineKey
from advisor.providers.train_command import ENTRY_POINT, EXPECT_OPTIONS, train_args, train_values
from advisor.search_spaces.space import FloatParam, IntParam, Param

from advisor.errors import AdvisorError

if TYPE_CHECKING:
    from advisor.providers.catalog import InstanceType

Goal = Literal["maximize", "minimize"]
Strategy = Literal["bayesian", "random", "grid", "hyperband"]
STRATEGIES: tuple[str, ...] = ("bayesian", "random", "grid", "hyperband")
TrialStatus = Literal["completed", "failed", "stopped", "running", "pending"]

DEFAULT_METRIC = "val_accuracy"
# What ``advisor.train`` reports after every epoch (val_accuracy for classifiers only), and
# whether a smaller value is better.
REPORTED_METRICS: dict[str, str] = {
    "val_accuracy": "maximize",
    "val_loss": "minimize",
    "train_loss": "minimize",
    "epoch_s": "minimize",
}
# Also reported after each epoch, not an objective: the epoch's median seconds per training step
# (steps 2..n). Imported trials record it in the calibration ledger (issue #14).
STEP_METRIC = "step_s"
# What ``advisor.train`` prints after each epoch; SageMaker's metric regex reads it.
METRIC_LINE = "advisor-metric: {name}={value:.6g};"
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
MAX_WARM_START_PARENTS = 5  # SageMaker's limit on ParentHyperParameterTuningJobs


def static_from_args(args: Iterable[str]) -> dict[str, str]:
    """The ``--name value`` pairs of an entry-point command line (inverse of ``entry_args``)."""
    out: dict[str, str] = {}
    items = list(args)
    for flag, value in zip(items[::2], items[1::2], strict=False):
        if flag.startswith("--") and not value.startswith("--"):
            out[flag[2:].replace("-", "_")] = value
    return out


def metric_regex(name: str) -> str:
    """The regex (one capture group) that reads metric ``name`` from ``METRIC_LINE`` output."""
    return rf"advisor-metric: {re.escape(name)}=([-+0-9.eEinfa]+);"


def metric_definitions(objective: str) -> list[dict[str, str]]:
    """SageMaker's metric definitions for a tuning job: the objective, and ``STEP_METRIC``
    (the measured step time the calibration ledger records; SageMaker allows 40)."""
    return [{"Name": n, "Regex": metric_regex(n)} for n in dict.fromkeys((objective, STEP_METRIC))]


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
    # Issue #29: earlier tuning jobs of this service to warm-start from (SageMaker only).
    warm_start_parents: tuple[str, ...] = ()

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
        if len(self.warm_start_parents) > MAX_WARM_START_PARENTS or not all(
            self.warm_start_parents
        ):
            raise ValueError(
                f"at most {MAX_WARM_START_PARENTS} named parent jobs, "
                f"but got {self.warm_start_parents}"
            )
        if not _NAME.match(self.objective_metric):
            raise ValueError(
                f"objective_metric must be an identifier, but got {self.objective_metric!r}"
            )

    @property
    def epochs(self) -> int | None:
        value = self.fixed.get("epochs")
        return int(value) if value is not None else None

    @property
    def device(self) -> str:
        """The ``--device`` every trial gets: ``cuda`` on a GPU machine, ``tpu`` on a TPU one,
        else ``cpu`` (``advisor.train`` refuses a device it does not find)."""
        if self.accelerator is None:
            return "cpu"
        return "tpu" if self.accelerator.upper().startswith("TPU") else "cuda"

    def static_values(self) -> dict[str, str]:
        """Every fixed value of the entry point as strings (``fixed``: model, batch size,
        epochs, plan, the predictions, hyperparameters; the metric, the device), built by the
        one function export builds its command with (``providers.train_command``)."""
        rest = dict(self.fixed)
        named = {k: rest.pop(k) for k in ("model", "batch_size", "epochs", "plan",
                                          *EXPECT_OPTIONS) if k in rest}  # fmt: skip
        return train_values(**named, hyperparameters=rest, metric=self.objective_metric,
                            device=self.device)  # fmt: skip

    def entry_args(self) -> list[str]:
        """The fixed command-line arguments of the entry point (``--batch-size 512`` ...)."""
        return train_args(self.static_values())

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
    instance_type: str | None = None  # the service's own machine type that ran it
    accelerator: str | None = None  # the service's own accelerator name (Vertex)
    accelerator_count: int = 0
    spot: bool | None = None  # None: the service does not say
    static: dict[str, str] = field(default_factory=dict)  # fixed values it ran with (batch_size...)
    step_s: float | None = None  # its last epoch's measured seconds per step (STEP_METRIC)

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
    warm_starts: ClassVar[bool] = False  # issue #29: it can start from earlier tuning jobs

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
        if spec.warm_start_parents and not self.warm_starts:
            raise AdvisorError(
                f"{self.label} cannot warm-start a tuning job from earlier jobs "
                f"({', '.join(spec.warm_start_parents)}).",
                "leave the parent jobs out; the narrowed ranges carry what was learnt.",
            )
        for problem, fix in self._refusals(spec):
            raise AdvisorError(problem, fix)

    def build_request(self, spec: TuningSpec) -> dict[str, Any]:
        """The exact request the service receives for ``spec`` (checked first)."""
        self.check(spec)
        return self._build(spec)

    def submit(self, spec: TuningSpec) -> Submission:
        """Submit ``spec`` with this environment's credentials.

        The lifecycle: refuse what a real submission lacks (``_submit_refusals``: a role, a
        compute cluster), fill in what needs the cloud (``_complete``: a default bucket), build
        and check the request, say who submits, send it (``_submit``).
        """
        for problem, fix in self._submit_refusals(spec):
            raise AdvisorError(problem, fix)
        spec = self._complete(spec)
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
        parsed = MachineKey(key)
        service, itype = parsed.service, parsed.instance_type
        if service not in cls.services:
            raise AdvisorError(
                f"Machine '{key}' is not one of {cls.name}'s machine types (service '{service}').",
                f"pick one with --instance, or submit to the cloud that sells it "
                f"({provider_for(service)}).",
            )
        return cls._map_type(service, itype)

    @classmethod
    def same_accelerator(cls, row: InstanceType, result: TrialResult) -> bool:
        """Whether catalog ``row`` has the accelerators ``result`` reports (when it reports any)."""
        return not result.accelerator_count or row.accelerator_count == result.accelerator_count

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

    def _submit_refusals(self, spec: TuningSpec) -> Iterable[tuple[str, str]]:
        """Yield (problem, fix) for what submitting needs beyond a dry run."""
        return ()

    def _complete(self, spec: TuningSpec) -> TuningSpec:
        """``spec`` with defaults that need the cloud filled in (e.g. the output bucket)."""
        return spec

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


def provider_for(service: str) -> str:
    """What to submit a job on ``service``'s machines with (``--provider sagemaker``)."""
    if service == registry.LOCAL:
        return "run it here with `python -m advisor.train`"
    provider = registry.for_service(service)
    return "another provider" if provider is None else f"--provider {provider.backend}"


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
