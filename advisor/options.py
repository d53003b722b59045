"""What ``advisor suggest`` takes: ``SuggestOptions``, the objective, the workload, and
whether an evaluation meets the budget and deadline. Size: one declaration of every suggest
option, with its check and its help, read by the CLI, the Python API and the service alike;
split, an option's parts would live in three modules."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from advisor.errors import AdvisorError, unknown_value_error
from advisor.evaluation.limits import constraints as constraints  # re-exported
from advisor.evaluation.limits import is_feasible as is_feasible  # re-exported
from advisor.evaluation.limits import objective_values as objective_values  # re-exported
from advisor.evaluation.workload import WorkloadInfo
from advisor.prediction.step.plan import (
    DEFAULT_PRECISION,
    PLAN_SEARCH_HELP,
    PRECISION_HELP,
    plan_fields,
)
from advisor.search_spaces.hf.flags import METHOD_HELP, SEQ_LEN_HELP, TOKENS_HELP, apply_flags
from advisor.search_spaces.space import JointSpace
from advisor.search_spaces.workloads import ModelRef

OBJECTIVES = ("time", "cost", "pareto")
# advisor.study.samplers.SAMPLERS, named here so the CLI need not import Optuna to offer them
# (tests/advisor/cli/test_user_paths.py holds the two together)
SAMPLER_NAMES = ("tpe", "gp", "random", "nsga2", "skopt")
DEFAULT_PROBE_BUDGET_SHARE = 0.10
DEFAULT_PROBE_BUDGET_USD = 1.0  # when no --budget is given
DEFAULT_TRIALS = 60  # most trials of a run without --trials
METRIC_NAMES = {"time": ["runtime_s"], "cost": ["cost_usd"], "pareto": ["runtime_s", "cost_usd"]}


@dataclass(frozen=True)
class OptionDoc:
    """How one ``SuggestOptions`` field is offered: its CLI flag (None: Python API only), its
    help (the CLI's and the HTTP API's), and whether the HTTP API accepts it."""

    flag: str | None
    help: str
    service: bool = True
    off: str | None = None  # the flag that sets a boolean False (--no-spot), when it has one


# The one declaration of what `advisor suggest` takes: the CLI's flags and help, the service's
# request fields (``advisor.service.schemas.SuggestRequest``) and the ``--server`` request body
# all follow from it (tests/advisor/test_options.py holds them together).
OPTIONS: dict[str, OptionDoc] = {
    "model": OptionDoc(
        "--model", "Built-in workload (see `advisor workloads`) or your own module:function."
    ),
    "framework": OptionDoc("--framework", "Framework the probes train with."),
    "space": OptionDoc(
        "--space",
        "Joint search space YAML (machines, batch sizes, hyperparameters); default: the "
        "workload's own.",
    ),
    "budget_usd": OptionDoc(
        "--budget",
        "Most the training run may cost, USD. Dearer candidates are infeasible; the default "
        "objective becomes the fastest run within the budget.",
    ),
    "deadline_s": OptionDoc(
        "--deadline",
        "Longest the training run may take (2h, 90m, 1h30m, 3600s). Slower candidates are "
        "infeasible; the default objective becomes the cheapest run within the deadline.",
    ),
    "objective": OptionDoc(
        "--objective", "Override the objective; pareto reports the time-cost front."
    ),
    "probe_budget_usd": OptionDoc(
        "--probe-budget",
        "Most the search may spend on probes, USD, priced at each candidate machine's rate "
        "(default: 10 % of --budget, else 1).",
    ),
    "epochs": OptionDoc(
        "--epochs",
        "Epochs of the run, the same at every batch size (default: per batch size, from the "
        "gradient-noise-scale model fitted to the workload's published epochs to stabilise).",
    ),
    "at_batch": OptionDoc(
        "--at-batch",
        "With --epochs: the batch size those epochs were seen at; the epochs at other batch "
        "sizes are then predicted from the probe's gradient noise scale.",
    ),
    "epochs_at": OptionDoc(
        "--epochs-at",
        "Epochs to target seen at a batch size, as B=N (e.g. --epochs-at 256=13); repeat it. "
        "One known point is scaled to other batch sizes by the probe's gradient noise scale; "
        "with two or more the noise scale is fitted to them and every batch size's epochs come "
        "from the fit.",
    ),
    "sampler": OptionDoc(
        "--sampler", "Optuna sampler for the hyperparameters (and machines with --no-screen)."
    ),
    "seed": OptionDoc("--seed", "Sampler seed."),
    "trials": OptionDoc(
        "--trials",
        "Trials to add now (default: until the search stops on its own, at most 60; a re-run "
        "of a study that has stopped adds none).",
    ),
    "timeout_s": OptionDoc(
        "--timeout", "Stop the search after this long (e.g. 10m), screening and probes included."
    ),
    "tune_s": OptionDoc(  # issue #29: short accuracy trials (advisor.accuracy) after the search
        "--tune",
        "Then spend up to this long (3m, 1h) of this machine on short training runs of the "
        "recommended batch size and its neighbours with sampled hyperparameters, pruned by "
        "Optuna's Hyperband pruner, and recommend hyperparameter values with their evidence "
        "(PyTorch; a re-run counts the runs the study already holds).",
    ),
    "snapshot": OptionDoc("--snapshot", "Catalog snapshot (default: newest)."),
    "storage": OptionDoc(
        "--storage", "Optuna storage URL (default: SQLite in ADVISOR_HOME).", service=False
    ),
    "study_name": OptionDoc(
        "--study-name", "Study name (default: from workload, space and limits)."
    ),
    "probe_iterations": OptionDoc(
        "--probe-iterations",
        "Training iterations each local probe times (fewer, but at least 5, once 4 s have passed).",
    ),
    "threads": OptionDoc("--threads", "Threads for local probes (default: all cores)."),
    "n_train": OptionDoc("--n-train", "Training samples (user models)."),
    "n_val": OptionDoc("--n-val", "Validation samples (user models)."),
    "screen": OptionDoc("--no-screen", "Let the sampler alone choose machines."),
    "cloud_probes": OptionDoc(
        "--cloud-probes",
        "After the screen, probe the N most promising distinct cloud machines for real "
        "(different accelerator types first) and re-rank with the measurements. Each probe "
        "starts a short managed training job (SageMaker, Vertex AI, Azure ML) that costs money, "
        "charged within --probe-budget; stops early when the measured leader cannot be "
        "overtaken.",
        service=False,
    ),
    "cloud_settings": OptionDoc(
        "--cloud-config",
        "Cloud settings for --cloud-probes: image, role, project, workspace... (default: "
        "$ADVISOR_HOME/cloud.yaml).",
        service=False,
    ),
    "emulate_cloud": OptionDoc(
        "--emulate-cloud-probes",
        "Run every cloud probe job here through the local emulation (tests, CI).",
        service=False,
    ),
    "data_gb": OptionDoc(
        "--data-gb",
        "GB of data a cloud job downloads before training (default: a built-in workload's "
        "size; a user model without it leaves the download out).",
    ),
    # Issue #28: machine filters in SkyPilot's words; they narrow the space's machines.
    "gpus": OptionDoc(
        "--gpus",
        "Only machines with this accelerator and count, as SkyPilot writes it: A100:1, V100:4, "
        "T4 (count 1), cpu (none); a family matches its variants (A100: A100-80GB too).",
    ),
    "cloud": OptionDoc(
        "--cloud",
        "Only this cloud's machines: aws, gcp or azure (this machine too only with --local).",
    ),
    "region": OptionDoc(
        "--region",
        "Price every machine in this region (us-east-1, us-central1, eastus...); types not "
        "sold there are left out (default: each type's cheapest region).",
    ),
    "spot": OptionDoc(
        "--spot",
        "--spot: spot/preemptible capacity only; --no-spot: on demand only (default: both).",
        off="--no-spot",
    ),
    "local": OptionDoc(
        "--local",
        "Whether this machine is a candidate (probed for real; default: yes, unless --cloud).",
        off="--no-local",
    ),
    "precision": OptionDoc("--precision", PRECISION_HELP),  # issue #35 (and --plan)
    "plan": OptionDoc("--plan", PLAN_SEARCH_HELP),
    "include_previous_generation": OptionDoc(
        "--include-previous-generation",
        "Also recommend previous-generation and retired machine types (K80, P3, Azure NCv3; "
        "the catalog's lifecycle column), left out by default.",
    ),
    "value_of_time": OptionDoc(  # issue #37
        "--value-of-time", "USD an hour of waiting is worth: recommend least cost + time x value."
    ),
    "max_nodes": OptionDoc(  # issue #49
        "--max-nodes",
        "Also consider 2, 4, 8... machines of a type, up to this many, joined by the cloud's "
        "network under torchrun (types with a cited network figure only; default 1: one "
        "machine, and the report says when more would have been faster or cheaper).",
    ),
    # issue #48: written into the hf: model reference and --n-train (the service takes those)
    "method": OptionDoc("--method", METHOD_HELP, service=False),
    "seq_len": OptionDoc("--seq-len", SEQ_LEN_HELP, service=False),
    "tokens": OptionDoc("--tokens", TOKENS_HELP, service=False),
}
MAX_NODES = 64  # most machines --max-nodes takes


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
    epochs_at: tuple[tuple[int, int], ...] = ()  # issue #19: (B, N) pairs, --epochs-at B=N
    sampler: str = "tpe"
    seed: int = 0
    trials: int | None = None  # None: until it stops (<= DEFAULT_TRIALS); N: N more, past its stop
    timeout_s: float | None = None
    tune_s: float | None = None  # issue #29: --tune, this machine's time for short runs
    snapshot: str | None = None
    storage: str | None = None
    study_name: str | None = None
    probe_iterations: int = 8
    threads: int | None = None
    n_train: int | None = None
    n_val: int | None = None
    screen: bool = True
    cloud_probes: int = 0  # issue #14: probe the N most promising cloud machines for real
    cloud_settings: Any = None  # a cloud.yaml path, a CloudSettings, or None ($ADVISOR_HOME)
    emulate_cloud: bool = False  # every provider's probe job runs through the local emulation
    data_gb: float | None = None  # issue #14: the dataset a cloud job downloads (GB)
    include_previous_generation: bool = False  # issue #27: old types only when asked for
    precision: str = DEFAULT_PRECISION  # issue #35: auto (default), fp32, tf32, bf16, fp16
    plan: str | None = None  # issue #35: --plan's fixed fields (the rest searched per machine)
    gpus: str | None = None  # issue #28: filters in SkyPilot's words; None: the space's
    cloud: str | None = None
    region: str | None = None
    spot: bool | None = None
    local: bool | None = None
    value_of_time: float | None = None  # issue #37: USD per hour; objective cost + time x value
    max_nodes: int = 1  # issue #49: machines of a type joined by their network, at most
    method: str | None = None  # issue #48: hf: models; moved into the model reference
    seq_len: int | None = None
    tokens: int | None = None  # issue #48: moved into n_train (sequences of seq_len)

    def __post_init__(self) -> None:
        model, n_train, epochs = apply_flags(self.model, self.n_train, self.method,
                                             self.seq_len, self.tokens, self.epochs)  # fmt: skip
        for name, value in (("model", model), ("n_train", n_train), ("epochs", epochs),
                            ("method", None), ("seq_len", None), ("tokens", None)):  # fmt: skip
            object.__setattr__(self, name, value)
        if self.data_gb is not None and not 0 <= self.data_gb < math.inf:
            raise AdvisorError(f"--data-gb must be >= 0, got {self.data_gb}.", "give a size in GB.")
        for name in ("budget_usd", "deadline_s", "timeout_s", "value_of_time"):
            v = getattr(self, name)
            if v is not None and not 0 < v < math.inf:  # NaN and inf refused too
                raise AdvisorError(f"{name} must be > 0, got {v}.", "give a positive value.")
            if isinstance(v, int) and not isinstance(v, bool):  # 5 and 5.0: one study name
                object.__setattr__(self, name, float(v))
        if self.tune_s is not None and not 0 < self.tune_s < math.inf:
            raise AdvisorError(
                f"--tune must be a positive time, got {self.tune_s}.", "give one such as 3m or 1h."
            )
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
            isinstance(self.max_nodes, bool)
            or not isinstance(self.max_nodes, int)
            or not 1 <= self.max_nodes <= MAX_NODES
        ):
            raise AdvisorError(
                f"--max-nodes must be a whole number from 1 to {MAX_NODES}, got "
                f"{self.max_nodes!r}.",
                "give the most machines of one type a run may use (1: one machine).",
            )
        if (
            isinstance(self.cloud_probes, bool)
            or not isinstance(self.cloud_probes, int)
            or self.cloud_probes < 0
        ):
            raise AdvisorError(
                f"--cloud-probes must be a whole number >= 0, got {self.cloud_probes!r}.",
                "give how many cloud machines to probe for real (0: none).",
            )
        if self.threads is not None:
            from advisor.probes.host import check_threads

            check_threads(self.threads)  # issue #28: at most this machine's cores
        plan_fields(self.plan, self.precision)  # #35: a bad --plan, one line; #50: 2 precisions
        if self.gpus is not None:
            from advisor.search_spaces.filters import parse_gpus

            parse_gpus(self.gpus)  # NAME[:COUNT], checked here; the name against the catalog
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
        """--objective; else cost (--value-of-time), time (--budget), cost (--deadline), pareto."""
        if self.objective is not None:
            return self.objective
        if self.value_of_time is not None:
            return "cost"
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
    if ModelRef(options.model).is_user:
        from advisor.evaluation.user_sizes import user_sizes  # issue #36: from its data

        n_train, n_val = user_sizes(
            options.model, options.framework, options.n_train, options.n_val
        )
        return WorkloadInfo(
            name=options.model,
            framework=options.framework,
            n_train=n_train,
            n_val=n_val,
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


def request_body(options: SuggestOptions, space_text: str | None = None) -> dict[str, Any]:
    """The service's request for ``options`` (``advisor suggest --server``): every field the
    HTTP API accepts (``OPTIONS[...].service``) that is set; the space as its YAML text."""
    body: dict[str, Any] = {}
    for name, doc in OPTIONS.items():
        value = space_text if name == "space" else getattr(options, name)
        if not doc.service or value is None:
            continue
        body[name] = [list(pair) for pair in value] if name == "epochs_at" else value
    return body
