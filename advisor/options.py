"""What ``advisor suggest`` takes: ``SuggestOptions``, the objective, the workload, and
whether an evaluation meets the budget and deadline."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from advisor.errors import AdvisorError, unknown_value_error
from advisor.scoring import Evaluation, WorkloadInfo
from advisor.search_spaces.space import JointSpace

OBJECTIVES = ("time", "cost", "pareto")
DEFAULT_PROBE_BUDGET_SHARE = 0.10
DEFAULT_PROBE_BUDGET_USD = 1.0  # when no --budget is given
DEFAULT_TRIALS = 60  # most trials of a run without --trials
METRIC_NAMES = {"time": ["runtime_s"], "cost": ["cost_usd"], "pareto": ["runtime_s", "cost_usd"]}


@dataclass(frozen=True)
class SuggestOptions:
    """Everything ``advisor suggest`` takes (see the CLI for the meaning of each)."""

    model: str
    framework: str = "torch"
    space: JointSpace | None = None
    budget_usd: float | None = None
    deadline_s: float | None = None
    objective: str | None = None
    probe_budget_usd: float | None = None
    epochs: int | None = None
    at_batch: int | None = None  # issue #19: the batch size --epochs was seen at
    # issue #19: epochs known at several batch sizes ((B, N) pairs, --epochs-at B=N)
    epochs_at: tuple[tuple[int, int], ...] = ()
    sampler: str = "tpe"
    seed: int = 0
    # None: run until the search stops on its own (at most DEFAULT_TRIALS), and a re-run of a
    # study that has stopped adds nothing (same command, same answer). N: add up to N trials
    # now; on a re-run, beyond the planner's stop (the sampler then explores configurations
    # whose probe is already paid for).
    trials: int | None = None
    timeout_s: float | None = None
    snapshot: str | None = None
    storage: str | None = None
    study_name: str | None = None
    probe_iterations: int = 8
    threads: int | None = None
    n_train: int | None = None
    n_val: int | None = None
    screen: bool = True
    # Issue #14: probe the N most promising distinct cloud machines for real after the
    # screen (advisor.cloud_probes); their spend counts against the probe budget.
    cloud_probes: int = 0
    # Where the cloud settings come from: a cloud.yaml path, a CloudSettings object, or None
    # ($ADVISOR_HOME/cloud.yaml).
    cloud_settings: Any = None
    emulate_cloud: bool = False  # every provider's probe job runs through the local emulation
    data_gb: float | None = None  # issue #14: the dataset a cloud job downloads (GB)

    def __post_init__(self) -> None:
        if self.data_gb is not None and not 0 <= self.data_gb < math.inf:
            raise AdvisorError(f"--data-gb must be >= 0, got {self.data_gb}.", "give a size in GB.")
        for name in ("budget_usd", "deadline_s", "timeout_s"):
            v = getattr(self, name)
            if v is not None and not 0 < v < math.inf:  # NaN and inf refused too
                raise AdvisorError(f"{name} must be > 0, got {v}.", "give a positive value.")
        if self.probe_budget_usd is not None and not 0 <= self.probe_budget_usd < math.inf:
            raise AdvisorError(
                f"--probe-budget must be >= 0, got {self.probe_budget_usd}.",
                "give a positive amount in USD.",
            )
        if self.objective is not None and self.objective not in OBJECTIVES:
            raise unknown_value_error("objective", self.objective, OBJECTIVES)
        if self.trials is not None and self.trials <= 0:
            raise AdvisorError(f"--trials must be > 0, got {self.trials}.", "give at least 1.")
        if self.epochs is not None and self.epochs <= 0:
            raise AdvisorError(f"--epochs must be > 0, got {self.epochs}.", "give at least 1.")
        if self.at_batch is not None and (self.epochs is None or self.at_batch <= 0):
            raise AdvisorError(
                f"--at-batch {self.at_batch} needs --epochs and a positive batch size.",
                "pass --epochs N --at-batch B (N epochs seen at batch size B).",
            )
        self._check_epochs_at()
        if (
            isinstance(self.cloud_probes, bool)
            or not isinstance(self.cloud_probes, int)
            or self.cloud_probes < 0
        ):
            raise AdvisorError(
                f"--cloud-probes must be a whole number >= 0, got {self.cloud_probes!r}.",
                "give how many cloud machines to probe for real (0: none).",
            )
        if self.probe_iterations < 3:
            raise AdvisorError(
                f"--probe-iterations must be >= 3, got {self.probe_iterations}.",
                "the first iteration is warm-up; give at least 3.",
            )

    def _check_epochs_at(self) -> None:
        """--epochs-at B=N: positive whole numbers, one per batch size, not with --epochs alone."""
        try:
            pairs = [tuple(p) for p in self.epochs_at if not isinstance(p, str | bytes)]
        except TypeError:  # not pairs at all, e.g. (256, 13)
            pairs = [()]
        if len(pairs) != len(self.epochs_at) or any(
            len(p) != 2
            or not all(isinstance(x, int) and not isinstance(x, bool) and x > 0 for x in p)
            for p in pairs
        ):
            raise AdvisorError(
                f"--epochs-at needs positive whole numbers B=N, got {self.epochs_at!r}.",
                "write each as --epochs-at 256=13 (13 epochs seen at batch size 256).",
            )
        batches = [p[0] for p in pairs] + ([self.at_batch] if self.at_batch else [])
        if len(set(batches)) != len(batches):
            raise AdvisorError(
                f"--epochs-at gives batch size {_first_repeat(batches)} more than once.",
                "give each batch size's epochs once.",
            )
        object.__setattr__(self, "epochs_at", tuple(sorted(pairs)))  # lists from JSON too
        if pairs and self.epochs is not None and self.at_batch is None:
            raise AdvisorError(
                f"--epochs {self.epochs} (every batch size) contradicts --epochs-at.",
                "drop --epochs, or say where it was seen with --at-batch B.",
            )

    @property
    def resolved_objective(self) -> str:
        """--objective, else time with a budget, cost with only a deadline, else pareto."""
        if self.objective is not None:
            return self.objective
        if self.budget_usd is not None:
            return "time"
        if self.deadline_s is not None:
            return "cost"
        return "pareto"

    @property
    def resolved_probe_budget(self) -> float:
        if self.probe_budget_usd is not None:
            return self.probe_budget_usd
        if self.budget_usd is not None:
            return DEFAULT_PROBE_BUDGET_SHARE * self.budget_usd
        return DEFAULT_PROBE_BUDGET_USD


def workload_info(options: SuggestOptions) -> WorkloadInfo:
    """The workload from --model: a built-in name, or a user import path ``module:function``."""
    if ":" in options.model:
        if not options.n_train:
            raise AdvisorError(
                f"--model {options.model} is a user model, so its dataset size is unknown.",
                "pass --n-train N (and --n-val N) with it.",
            )
        return WorkloadInfo(
            name=options.model,
            framework=options.framework,
            n_train=options.n_train,
            n_val=options.n_val or 0,
            epochs=options.epochs,
            at_batch=options.at_batch,  # issue #19
            epochs_at=options.epochs_at,  # sorted (B, N) pairs
            **_data_size(options, None),  # issue #14
        )
    from advisor.search_spaces import workloads

    wl = workloads.get(options.model)
    if options.framework not in wl.builders:
        raise AdvisorError(
            f"Workload '{wl.name}' has no {options.framework} version.",
            f"use --framework {' or '.join(wl.builders)}.",
        )
    return WorkloadInfo(
        name=wl.name,
        framework=options.framework,
        n_train=options.n_train or wl.n_train,
        n_val=options.n_val if options.n_val is not None else wl.n_val,
        epochs=options.epochs,
        at_batch=options.at_batch,  # issue #19
        epochs_at=options.epochs_at,  # sorted (B, N) pairs
        epochs_to_stabilise=dict(wl.epochs_to_stabilise),
        default_epochs=wl.default_epochs,
        **_data_size(options, wl),  # issue #14
    )


def _first_repeat(values: list[int]) -> int:
    return next(v for i, v in enumerate(values) if v in values[:i])


def _data_size(options: SuggestOptions, wl: Any) -> dict[str, Any]:
    """Issue #14: the bytes a cloud job downloads before training and where the figure comes
    from: --data-gb, else a built-in workload's size model (``Workload.data_bytes``), else
    none (a user model without --data-gb: the term is left out, and the report says so)."""
    if options.data_gb is not None:
        return {"data_bytes": options.data_gb * 1e9, "data_basis": "--data-gb"}
    if wl is None:
        return {}
    n_train = options.n_train or wl.n_train
    n_val = options.n_val if options.n_val is not None else wl.n_val
    shape = "x".join(map(str, wl.input_shape))
    return {
        "data_bytes": wl.data_bytes(n_train, n_val),
        "data_basis": f"{n_train + n_val:,} samples x fp32 {shape}, modelled",
    }


def objective_values(objective: str, ev: Evaluation) -> list[float]:
    """The study's objective values of a finished evaluation (runtime, cost or both)."""
    assert ev.runtime is not None and ev.cost is not None
    if objective == "time":
        return [ev.runtime.value]
    if objective == "cost":
        return [ev.cost.value]
    return [ev.runtime.value, ev.cost.value]


def constraints(
    options: SuggestOptions, ev: Evaluation, optimistic: bool = False
) -> dict[str, float]:
    """Optuna constraint values (<= 0: met) of the budget and deadline; ``optimistic`` uses
    the interval's low end (could it still fit?)."""
    assert ev.runtime is not None and ev.cost is not None
    out: dict[str, float] = {}
    if options.budget_usd is not None:
        cost = ev.cost.low if optimistic else ev.cost.value
        out["budget"] = cost - options.budget_usd
    if options.deadline_s is not None:
        runtime = ev.runtime.low if optimistic else ev.runtime.value
        out["deadline"] = runtime - options.deadline_s
    return out


def is_feasible(options: SuggestOptions, ev: Evaluation, optimistic: bool = False) -> bool:
    """Whether ``ev`` meets the budget and deadline."""
    return all(v <= 0 for v in constraints(options, ev, optimistic).values())
