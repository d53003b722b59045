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

import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from advisor.errors import AdvisorError
from advisor.options import (
    METRIC_NAMES,
    OBJECTIVES,
    SuggestOptions,
    constraints,
    is_feasible,
    objective_values,
    workload_info,
)
from advisor.planner import Planner
from advisor.records import TrialRecord
from advisor.scoring import Backend, Candidate, Evaluation, WorkloadInfo, split_machine_key
from advisor.search_spaces.space import JointSpace, space_to_dict
from advisor.selection import feasible_trials, knee, pareto_front, recommended_trial
from advisor.storage import open_storage, resolve_storage, study_name_for

if TYPE_CHECKING:
    import optuna
    from optuna.storages import BaseStorage
    from optuna.trial import FrozenTrial

__all__ = [  # the loop, plus the names this module had before the split (kept importable)
    "METRIC_NAMES",
    "OBJECTIVES",
    "SuggestOptions",
    "SuggestOutcome",
    "evaluation_from_trial",
    "feasible_trials",
    "knee",
    "local_backend",
    "open_storage",
    "pareto_front",
    "recommended_trial",
    "resolve_storage",
    "run_suggest",
    "study_name_for",
    "suggest",
    "workload_info",
]

Progress = Callable[[str, int, int], None]


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


def local_backend(
    options: SuggestOptions, storage: str | BaseStorage, space: JointSpace
) -> Backend:
    """The real back end: local probes (cached in ``storage``) and the performance model."""
    from advisor.local_backend import LocalBackend

    return LocalBackend(
        storage,
        options.snapshot,
        iterations=options.probe_iterations,
        threads=options.threads,
        runtime_params=[p.name for p in space.hyperparameters if p.affects_runtime],
    )


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
        backend = local_backend(options, url if storage is None else storage_obj, space)
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
        rec = TrialRecord.from_trial(t)
        if rec is None:
            continue
        if rec.source != "managed":
            outcome.probe_spent_usd += rec.probe_charged_usd
            charged.add((split_machine_key(rec.machine)[0], rec.batch_size))
        done[(rec.machine, rec.batch_size)] = rec.to_evaluation()

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

    planner = Planner(objective, options, outcome.screen) if outcome.screen else None
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
            record = TrialRecord.from_evaluation(
                ev,
                instance=dict(cand.instance.to_dict(), catalog_snapshot=backend.snapshot),
                charged_usd=charge,
                feasible=is_feasible(options, ev) if ev.ok else None,
            )
            # Few, grouped attributes: each one is a row (and query) in an RDB storage.
            for k, v in record.to_attrs().items():
                trial.set_user_attr(k, v)
            done[(machine, batch)] = ev
            if not ev.ok:
                finish(trial, state=optuna.trial.TrialState.FAIL)
            else:
                for k, v in constraints(options, ev).items():
                    trial.set_constraint(k, v)
                finish(trial, objective_values(objective, ev))
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


def evaluation_from_trial(t: FrozenTrial) -> Evaluation | None:
    """Rebuild the Evaluation a finished trial recorded (None for trials without one)."""
    rec = TrialRecord.from_trial(t)
    return None if rec is None else rec.to_evaluation()


def suggest(
    options: SuggestOptions | None = None,
    *,
    backend: Backend | None = None,
    progress: Progress | None = None,
    storage: Any = None,
    **fields: Any,
) -> dict[str, Any]:
    """``advisor suggest`` as a function: run (or resume) the study and return the report
    (the JSON document ``advisor suggest --json`` prints).

    Pass ``SuggestOptions`` or its fields (``advisor.suggest(model="fcn", budget_usd=5)``);
    ``backend`` replaces the local probes (e.g. ``advisor.replay.ReplayBackend``). Raises
    AdvisorError when no candidate fits the budget or deadline.
    """
    from advisor.report import build_report, check_feasible

    if options is None:
        options = SuggestOptions(**fields)
    elif fields:
        raise TypeError("pass SuggestOptions or its fields, not both")
    outcome = run_suggest(options, backend, progress=progress, storage=storage)
    check_feasible(outcome)
    return build_report(outcome)
