"""The joint Optuna study: machine x batch size x hyperparameters, scored by probes + models.

``run_suggest(SuggestOptions(...))`` is the public front of ``advisor suggest``:

1. Resolve the workload, its space, the candidates (catalog machines matching the space, on
   demand and spot, plus this machine) and the objective (``--budget`` -> fastest run within
   the budget; ``--deadline`` -> cheapest run within the deadline; ``--objective`` overrides).
2. Open (or resume) the study in the storage; its name comes from the workload, framework,
   objective and a hash of the space and limits, so an identical re-run resumes it.
3. Screen: the back end predicts every (machine, batch) cheaply with an interval (the local
   back end probes this machine once per batch size, cached, then the performance model and
   iteration-time model are arithmetic). When a screen is available the machine and batch of
   each trial are chosen best-first by predicted value, among candidates whose optimistic
   bound (interval low end) could still beat the best result so far and whose probe fits the
   probe budget; the sampler chooses the hyperparameters. Without a screen the sampler
   chooses everything. The study stops when no candidate can improve (converged), the probe
   budget is spent, ``--trials`` or ``--timeout`` is reached, or on Ctrl-C (finished trials
   are kept).

Each trial is charged its probe once per (machine, batch): the predicted probe duration on that
machine times its price, whether the probe ran locally, was modelled or replayed.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from advisor.config import default_storage_url, home
from advisor.errors import AdvisorError, unknown_value_error
from advisor.scoring import (
    Backend,
    Candidate,
    Evaluation,
    WorkloadInfo,
    split_machine_key,
)
from advisor.search_spaces.space import JointSpace, space_to_dict

if TYPE_CHECKING:
    import optuna
    from optuna.trial import FrozenTrial

OBJECTIVES = ("time", "cost", "pareto")
DEFAULT_PROBE_BUDGET_SHARE = 0.10
TIE_SHARE = 0.05  # recommended run: objective values this close to the best count as ties
DEFAULT_PROBE_BUDGET_USD = 1.0  # when no --budget is given
BACKEND_ENV = "ADVISOR_BACKEND"
METRIC_NAMES = {"time": ["runtime_s"], "cost": ["cost_usd"], "pareto": ["runtime_s", "cost_usd"]}

Progress = Callable[[str, int, int], None]
_SQLITE_HOOK: list[Any] = []


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
    sampler: str = "tpe"
    seed: int = 0
    trials: int = 60
    timeout_s: float | None = None
    snapshot: str | None = None
    storage: str | None = None
    study_name: str | None = None
    probe_iterations: int = 8
    threads: int | None = None
    n_train: int | None = None
    n_val: int | None = None
    screen: bool = True

    def __post_init__(self) -> None:
        for name in ("budget_usd", "deadline_s", "timeout_s"):
            v = getattr(self, name)
            if v is not None and not v > 0:
                raise AdvisorError(f"{name} must be > 0, got {v}.", "give a positive value.")
        if self.probe_budget_usd is not None and self.probe_budget_usd < 0:
            raise AdvisorError(
                f"--probe-budget must be >= 0, got {self.probe_budget_usd}.",
                "give a positive amount in USD.",
            )
        if self.objective is not None and self.objective not in OBJECTIVES:
            raise unknown_value_error("objective", self.objective, OBJECTIVES)
        if self.trials <= 0:
            raise AdvisorError(f"--trials must be > 0, got {self.trials}.", "give at least 1.")
        if self.epochs is not None and self.epochs <= 0:
            raise AdvisorError(f"--epochs must be > 0, got {self.epochs}.", "give at least 1.")
        if self.at_batch is not None and (self.epochs is None or self.at_batch <= 0):
            raise AdvisorError(
                f"--at-batch {self.at_batch} needs --epochs and a positive batch size.",
                "pass --epochs N --at-batch B (N epochs seen at batch size B).",
            )
        if self.probe_iterations < 3:
            raise AdvisorError(
                f"--probe-iterations must be >= 3, got {self.probe_iterations}.",
                "the first iteration is warm-up; give at least 3.",
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


@dataclass
class SuggestOutcome:
    """What a run of the study did (the report reads the rest from the study)."""

    study: optuna.Study
    storage_url: str
    options: SuggestOptions
    objective: str
    workload: WorkloadInfo
    space: JointSpace
    candidates: list[Candidate]
    screen: dict[tuple[str, int], Evaluation] = field(default_factory=dict)
    guided: bool = False
    resumed: bool = False
    new_trials: int = 0
    new_probes: int = 0
    probe_budget_usd: float = 0.0
    probe_spent_usd: float = 0.0
    stop_reason: str = ""
    wall_s: float = 0.0
    snapshot: str = ""


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
            at_batch=options.at_batch,
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
        at_batch=options.at_batch,
        epochs_to_stabilise=dict(wl.epochs_to_stabilise),
        default_epochs=wl.default_epochs,
    )


def resolve_storage(url: str | None) -> str:
    """The storage URL; the default SQLite folder is created, a user's missing folder is an error."""
    if url is None:
        home().mkdir(parents=True, exist_ok=True)
        return default_storage_url()
    if url.startswith("sqlite:///"):
        path = Path(url.removeprefix("sqlite:///"))
        if str(path) not in ("", ":memory:") and not path.parent.exists():
            raise AdvisorError(
                f"The storage folder {path.parent} does not exist.",
                f"create it (mkdir -p {path.parent}) or pass another --storage URL.",
            )
    return url


def study_name_for(
    options: SuggestOptions, workload: WorkloadInfo, space: JointSpace, snapshot: str
) -> str:
    """A stable name: the same inputs give the same study, so a re-run resumes it."""
    if options.study_name:
        return options.study_name
    objective = options.resolved_objective
    ident = {
        "space": space_to_dict(space),
        "budget": options.budget_usd,
        "deadline": options.deadline_s,
        "epochs": options.epochs,
        "at_batch": options.at_batch,  # issue #19
        "epochs_model": "gradient-noise-scale",  # issue #19: epochs per batch size changed
        "snapshot": snapshot,
        "iterations": options.probe_iterations,
        "n_train": workload.n_train,
        "n_val": workload.n_val,
    }
    digest = hashlib.sha1(json.dumps(ident, sort_keys=True, default=str).encode()).hexdigest()
    name = workload.name.replace(":", ".")
    return f"advisor-{name}-{workload.framework}-{objective}-{digest[:8]}"


def open_storage(url: str) -> Any:
    """The Optuna storage for ``url``. SQLite files use WAL with synchronous=NORMAL: each
    commit then skips an fsync (a trial writes ~20 attributes), and optuna-dashboard can read
    while a study runs. A power cut may lose the last trials, never corrupt the file."""
    import optuna

    if url.startswith("sqlite:"):
        _sqlite_pragmas_on_connect()
    return optuna.storages.get_storage(url)


def _sqlite_pragmas_on_connect() -> None:
    import sqlite3

    from sqlalchemy import event
    from sqlalchemy.engine import Engine

    def _pragmas(dbapi_conn: Any, _record: Any) -> None:
        if isinstance(dbapi_conn, sqlite3.Connection):
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA synchronous=NORMAL")
            cur.close()

    if not _SQLITE_HOOK:  # once per process
        _SQLITE_HOOK.append(_pragmas)
        event.listen(Engine, "connect", _pragmas)


def default_backend(options: SuggestOptions, storage: str, space: JointSpace) -> Backend:
    """ADVISOR_BACKEND (``replay:PATH.json``, for tests) or the real local back end."""
    spec = os.environ.get(BACKEND_ENV)
    if spec:
        from advisor.replay import backend_from_spec

        return backend_from_spec(spec)
    from advisor.scoring import LocalBackend

    return LocalBackend(
        storage,
        options.snapshot,
        iterations=options.probe_iterations,
        threads=options.threads,
        runtime_params=[p.name for p in space.hyperparameters if p.affects_runtime],
    )


def _objective_values(objective: str, ev: Evaluation) -> list[float]:
    assert ev.runtime is not None and ev.cost is not None
    if objective == "time":
        return [ev.runtime.value]
    if objective == "cost":
        return [ev.cost.value]
    return [ev.runtime.value, ev.cost.value]


def _constraints(
    options: SuggestOptions, ev: Evaluation, optimistic: bool = False
) -> dict[str, float]:
    assert ev.runtime is not None and ev.cost is not None
    out: dict[str, float] = {}
    if options.budget_usd is not None:
        cost = ev.cost.low if optimistic else ev.cost.value
        out["budget"] = cost - options.budget_usd
    if options.deadline_s is not None:
        runtime = ev.runtime.low if optimistic else ev.runtime.value
        out["deadline"] = runtime - options.deadline_s
    return out


def _feasible(options: SuggestOptions, ev: Evaluation, optimistic: bool = False) -> bool:
    return all(v <= 0 for v in _constraints(options, ev, optimistic).values())


def _dominates(a: tuple[float, float], b: tuple[float, float]) -> bool:
    return a[0] <= b[0] and a[1] <= b[1] and a != b


class _Planner:
    """Best-first choice of (machine, batch) from the screen, with an optimistic stop rule."""

    def __init__(
        self, objective: str, options: SuggestOptions, screen: dict[tuple[str, int], Evaluation]
    ) -> None:
        self.objective = objective
        self.options = options
        self.screen = {k: v for k, v in screen.items() if v.ok}
        ranks = self._rank_all()  # the screen is fixed: rank and filter it once
        self._order = sorted(
            (k for k, v in self.screen.items() if _feasible(options, v, optimistic=True)),
            key=lambda k: (ranks[k], k),
        )

    def _value(self, ev: Evaluation, optimistic: bool) -> float:
        assert ev.runtime is not None and ev.cost is not None
        iv = ev.runtime if self.objective == "time" else ev.cost
        return iv.low if optimistic else iv.value

    def next(
        self,
        done: dict[tuple[str, int], Evaluation],
        charged: set[tuple[str, int]],
        left_usd: float,
    ) -> tuple[tuple[str, int] | None, str]:
        """The next config to evaluate, or None and why not."""
        feasible_done = [e for e in done.values() if e.ok and _feasible(self.options, e)]
        incumbent = min((self._value(e, False) for e in feasible_done), default=math.inf)
        unaffordable = 0
        for key in self._order:  # best first: the first one left is the answer
            pred = self.screen[key]
            if key in done or not self._could_improve(pred, feasible_done, incumbent):
                continue
            base = (split_machine_key(key[0])[0], key[1])
            if base not in charged and pred.probe_cost_usd > left_usd + 1e-12:
                unaffordable += 1
                continue
            return key, ""
        return None, "probe budget spent" if unaffordable else "converged"

    def _could_improve(self, pred: Evaluation, best: list[Evaluation], incumbent: float) -> bool:
        if not best:
            return True
        assert pred.runtime is not None and pred.cost is not None
        if self.objective == "pareto":
            point = (pred.runtime.low, pred.cost.low)
            return not any(
                _dominates((e.runtime.value, e.cost.value), point)  # type: ignore[union-attr]
                or (e.runtime.value, e.cost.value) == point  # type: ignore[union-attr]
                for e in best
            )
        return self._value(pred, True) < incumbent

    def _rank_all(self) -> dict[tuple[str, int], float]:
        """Best-first order: the objective's predicted value; for a Pareto search, points on
        the predicted front first (by how many predicted points dominate them), then by the
        product time x cost."""
        keys = list(self.screen)
        if self.objective != "pareto":
            return {k: self._value(self.screen[k], False) for k in keys}
        import numpy as np

        pts = np.array([(e.runtime.value, e.cost.value) for e in self.screen.values()])  # type: ignore[union-attr]
        if not len(pts):
            return {}
        le = (pts[:, None, :] <= pts[None, :, :]).all(axis=2)  # le[i, j]: i is no worse than j
        eq = (pts[:, None, :] == pts[None, :, :]).all(axis=2)
        dominated_by = (le & ~eq).sum(axis=0)
        score = dominated_by * 1e30 + pts[:, 0] * pts[:, 1]
        return dict(zip(keys, score.tolist(), strict=True))


def run_suggest(
    options: SuggestOptions,
    backend: Backend | None = None,
    progress: Progress | None = None,
    storage: Any = None,
) -> SuggestOutcome:
    """Run (or resume) the study and return what happened; the trials stay in the storage.

    ``storage`` may be an Optuna storage object (tests, benchmarks); otherwise
    ``options.storage`` or the default SQLite file is used.
    """
    import optuna
    from optuna.study import StudyDirection

    from advisor.samplers import make_sampler
    from advisor.search_spaces.convert import suggest
    from advisor.search_spaces.loader import default_space

    started = time.perf_counter()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    objective = options.resolved_objective
    workload = workload_info(options)
    space = options.space or default_space(workload.name)
    if space.workload != workload.name and ":" not in options.model:
        raise AdvisorError(
            f"The space is for '{space.workload}' but the model is '{workload.name}'.",
            f"use --model {space.workload} or a space written for {workload.name}.",
        )
    url = resolve_storage(options.storage) if storage is None else "(in memory)"
    storage_obj = storage if storage is not None else open_storage(url)
    if backend is None:
        backend = default_backend(options, url if storage is None else storage_obj, space)
    candidates = backend.candidates(space)
    if not candidates:
        raise AdvisorError(
            "No machine matches the space's machine filter.",
            "widen 'machines' in the space file (providers, accelerators, max_price, max_gpus).",
        )
    by_key = {c.key: c for c in candidates}
    machine_keys = list(by_key)
    name = study_name_for(options, workload, space, backend.snapshot)
    directions: list[StudyDirection] = [StudyDirection.MINIMIZE] * (
        2 if objective == "pareto" else 1
    )
    existing = {s.study_name for s in optuna.get_all_study_summaries(storage_obj)}
    study = optuna.create_study(
        study_name=name,
        storage=storage_obj,
        directions=directions,
        sampler=make_sampler(options.sampler, options.seed),
        load_if_exists=True,
    )
    resumed = name in existing
    if not resumed:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            study.set_metric_names(METRIC_NAMES[objective])
        for key, value in {
            "workload": workload.name,
            "framework": workload.framework,
            "space": space_to_dict(space),
            "catalog_snapshot": backend.snapshot,
            "budget_usd": options.budget_usd,
            "deadline_s": options.deadline_s,
            "objective": objective,
            "epochs": options.epochs,
            "at_batch": options.at_batch,
            "n_train": workload.n_train,
            "n_val": workload.n_val,
            "backend": backend.name,
        }.items():
            study.set_user_attr(key, value)

    outcome = SuggestOutcome(
        study=study,
        storage_url=url,
        options=options,
        objective=objective,
        workload=workload,
        space=space,
        candidates=candidates,
        resumed=resumed,
        probe_budget_usd=options.resolved_probe_budget,
        snapshot=backend.snapshot,
    )

    # What this study already knows (resume): evaluated configs and the probe money spent.
    done: dict[tuple[str, int], Evaluation] = {}
    charged: set[tuple[str, int]] = set()
    for t in study.get_trials(deepcopy=False):
        if "machine" not in t.params or "batch_size" not in t.params:
            continue
        base = (split_machine_key(str(t.params["machine"]))[0], int(t.params["batch_size"]))
        probe_cost = t.user_attrs.get("probe_cost")
        if probe_cost is not None:
            outcome.probe_spent_usd += float(probe_cost["charged_usd"])
            charged.add(base)
        ev = evaluation_from_trial(t)
        if ev is not None:
            done[(str(t.params["machine"]), int(t.params["batch_size"]))] = ev

    # Screen every (machine, batch) cheaply; order the search by it when available.
    if options.screen:
        pairs = [(c, b) for b in space.batch_sizes for c in candidates]
        for i, (cand, batch) in enumerate(pairs):
            if progress:
                progress("screen", i, len(pairs))
            pred = backend.screen(workload, cand, batch, {})
            if pred is None:
                outcome.screen = {}
                break
            outcome.screen[(cand.key, batch)] = pred
        if progress:
            progress("screen", len(pairs), len(pairs))
    # The loop samples and records on an in-memory copy of the study; each finished trial is
    # then written to the storage in one transaction (add_trial) instead of ~25 commits
    # through a live trial. A trial in progress is therefore never half-written.
    work = optuna.create_study(
        directions=directions, sampler=make_sampler(options.sampler, options.seed)
    )
    work.add_trials([t for t in study.get_trials(deepcopy=False) if t.state.is_finished()])

    def finish(live: optuna.trial.Trial, *args: Any, **kwargs: Any) -> None:
        study.add_trial(work.tell(live, *args, **kwargs))

    planner = _Planner(objective, options, outcome.screen) if outcome.screen else None
    outcome.guided = planner is not None
    all_configs = {(c.key, b) for c in candidates for b in space.batch_sizes}

    deadline = None if options.timeout_s is None else started + options.timeout_s
    trial: optuna.trial.Trial | None = None
    stop = "trials"
    try:
        for i in range(options.trials):
            if progress:
                progress("trials", i, options.trials)
            if deadline is not None and time.perf_counter() > deadline:
                stop = "timeout"
                break
            left = outcome.probe_budget_usd - outcome.probe_spent_usd
            if planner is not None:
                nxt, why = planner.next(done, charged, left)
                if nxt is None:
                    stop = why
                    break
                work.enqueue_trial({"machine": nxt[0], "batch_size": nxt[1]})
            elif all_configs <= set(done):
                stop = "every machine x batch size evaluated"
                break
            elif left <= 0:
                stop = "probe budget spent"
                break
            trial = work.ask()
            machine, batch, hps = suggest(trial, space, machine_keys)
            cand = by_key[machine]
            base = (split_machine_key(machine)[0], batch)
            pred = outcome.screen.get((machine, batch))
            if base not in charged and pred is not None and pred.probe_cost_usd > left + 1e-12:
                trial.set_user_attr(
                    "pruned_reason",
                    f"its probe would cost USD {pred.probe_cost_usd:.4f}, "
                    f"only USD {max(left, 0):.4f} of the probe budget is left",
                )
                finish(trial, state=optuna.trial.TrialState.PRUNED)
                trial = None
                continue
            ev = backend.evaluate(workload, cand, batch, hps)
            charge = 0.0 if base in charged else ev.probe_cost_usd
            charged.add(base)
            outcome.probe_spent_usd += charge
            outcome.new_trials += 1
            _record(trial, ev, charge, backend.snapshot, cand, hps)
            done[(machine, batch)] = ev
            if not ev.ok:
                trial.set_user_attr("pruned_reason", ev.error or "probe failed")
                finish(trial, state=optuna.trial.TrialState.FAIL)
            else:
                for k, v in _constraints(options, ev).items():
                    trial.set_constraint(k, v)
                trial.set_user_attr("feasible", _feasible(options, ev))
                finish(trial, _objective_values(objective, ev))
            trial = None
        else:
            stop = "trials"
    except KeyboardInterrupt:
        stop = "interrupted (Ctrl-C); finished trials are kept"
        if trial is not None:
            finish(trial, state=optuna.trial.TrialState.FAIL)
    if progress:
        progress("trials", options.trials, options.trials)
    outcome.stop_reason = stop
    outcome.new_probes = backend.new_probes
    outcome.wall_s = time.perf_counter() - started
    return outcome


def _record(
    trial: optuna.trial.Trial,
    ev: Evaluation,
    charge: float,
    snapshot: str,
    cand: Candidate,
    hps: dict[str, Any],
) -> None:
    # Few, grouped attributes: each one is a separate row (and query) in an RDB storage.
    # The hyperparameters are the trial's params; the constraints its system attrs.
    attrs: dict[str, Any] = {
        "source": ev.source,
        "price_per_hour": ev.price_per_hour,
        "spot": ev.spot,
        "instance": dict(cand.instance.to_dict(), catalog_snapshot=snapshot),
        "epochs": ev.epochs,
        "probe_cost": {"seconds": ev.probe_s, "charged_usd": charge},
        "estimate": ev.estimate,
        "phases": ev.phases.to_dict() if ev.phases else None,
        "probe": ev.probe.to_dict() if ev.probe else None,
        "runtime_s": ev.runtime.to_dict() if ev.runtime else None,
        "cost_usd": ev.cost.to_dict() if ev.cost else None,
    }
    for k, v in attrs.items():
        trial.set_user_attr(k, v)


def evaluation_from_trial(t: FrozenTrial) -> Evaluation | None:
    """Rebuild the Evaluation a finished trial recorded (None for trials without one)."""
    from advisor.probes.result import Interval
    from advisor.scoring import phases_from_dict

    ua = t.user_attrs
    if "source" not in ua or "machine" not in t.params:
        return None

    def iv(d: dict[str, float] | None) -> Interval | None:
        return None if d is None else Interval(d["value"], d["low"], d["high"])

    runtime, cost = iv(ua.get("runtime_s")), iv(ua.get("cost_usd"))
    return Evaluation(
        machine=str(t.params["machine"]),
        batch_size=int(t.params["batch_size"]),
        status="ok" if runtime is not None and cost is not None else "failed",
        runtime=runtime,
        cost=cost,
        source=str(ua["source"]),
        epochs=int(ua.get("epochs", 0)),
        price_per_hour=float(ua.get("price_per_hour", 0.0)),
        spot=bool(ua.get("spot", False)),
        probe_s=float((ua.get("probe_cost") or {}).get("seconds", 0.0)),
        estimate=dict(ua.get("estimate") or {}),
        phases=phases_from_dict(ua["phases"]) if ua.get("phases") else None,
        error=ua.get("pruned_reason"),
    )


def feasible_trials(study: optuna.Study) -> list[FrozenTrial]:
    """Finished trials that meet every constraint (budget, deadline)."""
    import optuna

    return [
        t
        for t in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
        if t.user_attrs.get("feasible", True)
    ]


def recommended_trial(study: optuna.Study, services: Sequence[str] | None = None) -> FrozenTrial:
    """The trial to train with: fastest (time), cheapest (cost), or for a Pareto study the
    front's knee (``knee``); among machines of ``services`` only, when given (``ec2``,
    ``vertex`` ...). Raises AdvisorError if none is feasible.
    """
    trials = feasible_trials(study)
    if services is not None:
        trials = [t for t in trials if str(t.params.get("machine", "")).split(":")[0] in services]
    if not trials:
        where = f" on {', '.join(services)}" if services is not None else ""
        raise AdvisorError(
            f"Study '{study.study_name}' has no feasible finished trial{where}.",
            "run `advisor suggest` with a larger --budget or --deadline (and a space that "
            "includes that cloud) first, or pass --instance.",
        )
    objective = study.user_attrs.get("objective", "time")
    if objective == "pareto" or len(study.directions) > 1:
        return knee(pareto_front(trials))
    # Values within TIE_SHARE of the best are a tie (well inside the estimates' intervals);
    # the other metric decides among them: the cheapest of the fastest, or vice versa.
    other = "cost_usd" if objective == "time" else "runtime_s"
    best = min(t.values[0] for t in trials)
    ties = [t for t in trials if t.values[0] <= best * (1 + TIE_SHARE)]
    return min(ties, key=lambda t: (_metric(t, other), t.values[0], t.number))


def _metric(t: FrozenTrial, name: str) -> float:
    value = t.user_attrs.get(name) or {}
    return float(value.get("value", float("inf")))


def knee(front: list[FrozenTrial]) -> FrozenTrial:
    """The front member closest to the ideal point, each objective scaled to [0, 1] over it."""
    lo = [min(t.values[i] for t in front) for i in (0, 1)]
    hi = [max(t.values[i] for t in front) for i in (0, 1)]

    def dist(t: FrozenTrial) -> float:
        return sum(((t.values[i] - lo[i]) / ((hi[i] - lo[i]) or 1.0)) ** 2 for i in (0, 1))

    return min(front, key=lambda t: (dist(t), t.number))


def pareto_front(trials: list[FrozenTrial]) -> list[FrozenTrial]:
    """Trials not dominated in (runtime, cost); one per (machine, batch)."""
    points = []
    for t in trials:
        rt, cost = t.user_attrs.get("runtime_s"), t.user_attrs.get("cost_usd")
        if rt and cost:
            points.append(((rt["value"], cost["value"]), t))
    front = [t for p, t in points if not any(_dominates(q, p) for q, _ in points)]
    seen: set[tuple[Any, Any]] = set()
    out = []
    for t in sorted(front, key=lambda t: t.number):
        k = (t.params.get("machine"), t.params.get("batch_size"))
        if k not in seen:
            seen.add(k)
            out.append(t)
    return out
