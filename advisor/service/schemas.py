"""Request bodies of the HTTP API (pydantic): unknown fields, bad values and oversized text
are refused with a 422 that names the field."""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from advisor.durations import MAX_DURATION_S
from advisor.providers.owned_checks import BOUNDS as _OWNED

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
MAX_SPACE_CHARS = 64_000
# Stated bounds, the CLI's own (``advisor.cli.params``): money up to USD 1e9 (``USD``: a
# budget above it is a typo, and 1e308 was accepted and run), durations up to 366 days
# (``advisor.durations``), dataset sizes up to 1e9 samples (``POSITIVE``).
MAX_USD = 1e9
MAX_SAMPLES = 10**9


def check_name(value: str, what: str = "study name") -> str:
    """A study (or snapshot) name: letters, digits, '.', '_', '-'; no path, no '..'."""
    if not NAME_RE.match(value) or ".." in value:
        raise ValueError(
            f"the {what} may hold only letters, digits, '.', '_' and '-' (no '/' or '..'), "
            "at most 128 characters"
        )
    return value


def _help(name: str) -> str:
    from advisor.options import OPTIONS

    return OPTIONS[name].help


def check_study(value: str) -> str:
    """A user's study name: ``check_name``, and none of the advisor's internal studies."""
    from advisor.service.teams import is_internal

    check_name(value)
    if is_internal(value):
        raise ValueError("that name is one of the advisor's internal studies; pick another name")
    return value


class _Strict(BaseModel):
    # allow_inf_nan=False: JSON's NaN and Infinity (and 1e400, decoded as inf) are refused as
    # "Input should be a finite number" where they enter, naming the field
    model_config = ConfigDict(extra="forbid", str_max_length=MAX_SPACE_CHARS, allow_inf_nan=False)


class SuggestRequest(_Strict):
    """What ``advisor suggest`` takes, less what only the caller's machine has (storage,
    cloud settings): ``advisor.options.OPTIONS`` declares each field and its help."""

    model: str = Field(description=_help("model"))
    framework: Literal["torch", "keras"] = Field("torch", description=_help("framework"))
    space: str | None = Field(None, description=_help("space"))
    budget_usd: float | None = Field(None, gt=0, le=MAX_USD, description=_help("budget_usd"))
    deadline_s: float | None = Field(None, gt=0, le=MAX_DURATION_S, description=_help("deadline_s"))
    objective: Literal["time", "cost", "pareto"] | None = Field(
        None, description=_help("objective")
    )
    probe_budget_usd: float | None = Field(
        None, ge=0, le=MAX_USD, description=_help("probe_budget_usd")
    )
    epochs: int | None = Field(None, gt=0, le=10_000, description=_help("epochs"))
    at_batch: int | None = Field(None, gt=0, le=10**9, description=_help("at_batch"))
    epochs_at: list[tuple[int, int]] = Field(
        default_factory=list, max_length=64, description=_help("epochs_at")
    )
    sampler: Literal["tpe", "gp", "random", "nsga2", "skopt"] = Field(
        "tpe", description=_help("sampler")
    )
    seed: int = Field(0, ge=0, le=2**32 - 1, description=_help("seed"))  # what samplers take
    trials: int = Field(60, gt=0, le=2000, description=_help("trials"))
    timeout_s: float | None = Field(None, gt=0, le=MAX_DURATION_S, description=_help("timeout_s"))
    tune_s: float | None = Field(None, gt=0, le=86_400, description=_help("tune_s"))
    snapshot: str | None = Field(None, description=_help("snapshot"))
    study_name: str | None = Field(None, description=_help("study_name"))
    probe_iterations: int = Field(8, ge=3, le=200, description=_help("probe_iterations"))
    threads: int | None = Field(None, gt=0, le=1024, description=_help("threads"))
    n_train: int | None = Field(None, gt=0, le=MAX_SAMPLES, description=_help("n_train"))
    n_val: int | None = Field(None, gt=0, le=MAX_SAMPLES, description=_help("n_val"))
    screen: bool = Field(True, description=_help("screen"))
    data_gb: float | None = Field(None, ge=0, le=1e6, description=_help("data_gb"))
    # issue #28: machine filters in SkyPilot's words (advisor.search_spaces.filters)
    gpus: str | None = Field(None, max_length=80, description=_help("gpus"))
    cloud: str | None = Field(None, max_length=40, description=_help("cloud"))
    region: str | None = Field(None, max_length=80, description=_help("region"))
    spot: bool | None = Field(None, description=_help("spot"))
    local: bool | None = Field(None, description=_help("local"))
    include_previous_generation: bool = Field(
        False, description=_help("include_previous_generation")
    )
    precision: Literal["auto", "fp32", "tf32", "bf16", "fp16"] = Field(
        "auto", description=_help("precision")
    )
    plan: str | None = Field(None, max_length=200, description=_help("plan"))  # issue #35
    value_of_time: float | None = Field(  # issue #37: USD per hour
        None, gt=0, le=MAX_USD, description=_help("value_of_time")
    )
    max_nodes: int = Field(1, ge=1, le=64, description=_help("max_nodes"))  # issue #49

    @field_validator("model")
    @classmethod
    def _model(cls, v: str) -> str:
        from advisor.errors import AdvisorError
        from advisor.search_spaces.workloads import ModelRef

        try:
            ref = ModelRef(v)
        except AdvisorError as exc:
            raise ValueError(exc.problem) from exc
        if ref.is_user:
            raise ValueError(
                "the service runs built-in workloads only (module:function would import code "
                "on the server); probe your own model locally with `advisor suggest`"
            )
        from advisor.search_spaces.workloads import names

        known = names()
        if v not in known:  # the value is not echoed: it may be anything a user pasted
            raise ValueError(f"not a built-in workload; use one of: {', '.join(sorted(known))}")
        return v

    @field_validator("snapshot")
    @classmethod
    def _snapshot(cls, v: str | None) -> str | None:
        return None if v is None else check_name(v, "snapshot")

    @field_validator("study_name")
    @classmethod
    def _study(cls, v: str | None) -> str | None:
        return None if v is None else check_study(v)


class PredictRequest(_Strict):
    """A probe (``advisor probe --json``) and the machines to predict."""

    probe: dict[str, Any]
    instances: list[str] = Field(min_length=1, max_length=200)
    epochs: int | None = Field(None, gt=0, le=10_000)
    spot: bool = False
    snapshot: str | None = None

    @field_validator("snapshot")
    @classmethod
    def _snapshot(cls, v: str | None) -> str | None:
        return None if v is None else check_name(v, "snapshot")

    @field_validator("instances")
    @classmethod
    def _instances(cls, v: list[str]) -> list[str]:
        for name in v:
            # catalog keys and the providers' own names (n1-standard-8+T4) both resolve
            if not re.match(r"^[A-Za-z0-9][A-Za-z0-9._:+-]{0,127}$", name):
                raise ValueError(f"'{name[:40]}' is not an instance type")
        return v


class CatalogQuery(_Strict):
    """Catalog filters (all optional)."""

    providers: list[str] = []
    services: list[str] = []
    accelerators: list[str] = []
    min_gpus: int = Field(0, ge=0)
    max_gpus: int | None = Field(None, ge=0)
    max_price: float | None = Field(None, gt=0, le=MAX_USD)
    spot: bool = False
    snapshot: str | None = None


_OPTION_VALUE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:/@=+-]{0,255}$")


class TuningTarget(_Strict):
    """Which managed tuning service, and its own options (``advisor submit``'s --role,
    --region, --project, --location, --subscription, --resource-group, --workspace,
    --compute); credentials are the server's own, never sent."""

    provider: str = Field(description="The managed tuning service: sagemaker, vertex or azureml.")
    provider_options: dict[str, str] = {}

    @field_validator("provider")
    @classmethod
    def _provider(cls, v: str) -> str:
        from advisor.providers import registry

        if v not in registry.backend_names():
            raise ValueError(f"use one of: {', '.join(registry.backend_names())}")
        return v

    @field_validator("provider_options")
    @classmethod
    def _options(cls, v: dict[str, str]) -> dict[str, str]:
        from advisor.providers import registry

        known = {o for p in registry.PROVIDERS for o in p.options}
        for key, value in v.items():
            if key not in known:
                raise ValueError(f"unknown provider option; use: {', '.join(sorted(known))}")
            if not _OPTION_VALUE.match(value):
                raise ValueError(f"provider option {key} is not a name, ARN or region")
        return v


class TuningPlanRequest(TuningTarget):
    """``advisor submit``'s job: around a study's recommendation (``study``), or on named
    machines (``instances``, with ``model`` and ``batch_size``)."""

    study: str | None = None
    instances: list[str] = Field([], max_length=20)
    model: str | None = None
    batch_size: int | None = Field(None, gt=0)
    epochs: int | None = Field(None, gt=0, le=10_000)
    tune: list[str] | None = Field(None, max_length=50)
    strategy: Literal["bayesian", "random", "grid", "hyperband"] | None = None
    image: str | None = Field(None, max_length=512)
    options: dict[
        Literal[
            "max_trials",
            "parallel_trials",
            "early_stopping",
            "max_runtime_s",
            "objective_metric",
            "goal",
            "output",
            "job_name",
            "spot",
        ],
        str | int | float | bool,
    ] = {}

    @field_validator("study")
    @classmethod
    def _study(cls, v: str | None) -> str | None:
        return None if v is None else check_study(v)

    @field_validator("instances")
    @classmethod
    def _instances(cls, v: list[str]) -> list[str]:
        return PredictRequest._instances(v)


class TuningSubmitRequest(TuningPlanRequest):
    """A plan to submit; ``dry_run`` returns the exact request instead (nothing is sent)."""

    dry_run: bool = False


class TuningImportRequest(TuningTarget):
    """Import a finished job's trials into ``study`` (in the service's storage)."""

    study: str

    @field_validator("study")
    @classmethod
    def _study(cls, v: str) -> str:
        return check_study(v)


class HardwareRequest(_Strict):
    """A machine the team owns (issue #37), as ``advisor hardware add`` takes it: a candidate
    of the team's suggestions, priced by amortisation + energy. The ranges are the machine's
    own (``advisor.providers.owned_checks.BOUNDS``), stated once for the CLI, hardware.json
    and the service."""

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$", description="Its name.")
    gpus: str = Field(max_length=64, description="COUNTxBOARD, 1 to 16 GPUs, e.g. 4xRTX4090.")
    purchase_usd: float = Field(
        gt=_OWNED["purchase_usd"].low, le=_OWNED["purchase_usd"].high, description="USD paid."
    )
    lifetime: str = Field(max_length=16, description="How long it is used: 3y, 36mo, 26000h.")
    power_w: float = Field(
        gt=_OWNED["power_w"].low, le=_OWNED["power_w"].high, description="Power draw, W."
    )
    usd_per_kwh: float = Field(
        ge=_OWNED["usd_per_kwh"].low, le=_OWNED["usd_per_kwh"].high, description="USD per kWh."
    )
    utilisation: float = Field(
        0.5,
        ge=_OWNED["utilisation"].low,
        le=_OWNED["utilisation"].high,
        description="Share of its lifetime it is busy (a prior: give yours).",
    )
    vcpus: int | None = Field(
        None, ge=_OWNED["vcpus"].low, le=_OWNED["vcpus"].high, description="CPU cores."
    )
    memory_gib: float | None = Field(
        None, ge=_OWNED["memory_gib"].low, le=_OWNED["memory_gib"].high, description="RAM, GiB."
    )
