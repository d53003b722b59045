"""The joint Optuna study: machine x batch size x hyperparameters, scored by probes + models.

``run_suggest(SuggestOptions(...))`` is the public front of ``advisor suggest``:

1. Resolve the workload, its space, the candidates (catalog machines matching the space, on
   demand and spot, plus this machine) and the objective (``--budget`` -> fastest run within
   the budget; ``--deadline`` -> cheapest run within the deadline; ``--objective`` overrides).
2. Open (or resume) the study in the storage; its name comes from the workload, framework,
   objective and a hash of the space and limits, so an identical re-run resumes it.
3. Screen: the back end predicts every (machine, batch) cheaply with an interval (the local
   back end probes this machine once per batch size, cached, then the performance model and
   iteration-time model are arithmetic; a pair's plans are searched only where it could still
   beat a row that fits: ``advisor.study.screen``). When a screen is available the machine and batch of
   each trial are chosen best-first by predicted value, among candidates whose optimistic
   bound (interval low end) could still beat the best result so far and whose probe fits the
   probe budget; the sampler chooses the hyperparameters. Without a screen the sampler
   chooses everything. The study stops when no candidate can improve (converged), the probe
   budget is spent, ``--trials`` or ``--timeout`` (which bounds the screen too) is reached,
   or on Ctrl-C (finished trials are kept, the trial in progress is marked FAIL and retried
   by the next run). The loop itself is ``advisor.study.loop.TrialLoop``.
4. Failed probes are results: each batch size whose local probe failed is written once as a
   FAIL trial with its reason, and summarised in ``SuggestOutcome.probe_failures``; when every
   probe failed the run ends with one line saying why.
5. Re-running the same command resumes the study: a study that had stopped on its own
   (converged, budget spent, trial limit) gets no new trials, so the answer is the same;
   ``--trials N`` adds N on purpose. Several processes may share one study: they see each
   other's trials, never evaluate a configuration another is evaluating, and spend the probe
   budget once (``advisor.study.claims``).

Issue #27: only what ran on a billed machine is charged to the probe budget. The remote probes
of ``--cloud-probes`` are charged at their billed time by that step; a trial charges a probe
only when its back end runs one on that machine (the replay back end, once per machine and
batch); the local back end's trials -- this machine's probe, or a modelled cloud machine --
charge nothing. Without ``--cloud-probes`` the search stops when it has converged (for the
local back end: once the best configuration tried ranks above every one left, as a trial
repeats its screen), at the trial cap or at ``--timeout``.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from advisor.errors import AdvisorError, Terminated
from advisor.evaluation.contract import Backend, RunSettings
from advisor.evaluation.failures import failed_probes, summary
from advisor.evaluation.workload import WorkloadInfo
from advisor.options import (
    DEFAULT_TRIALS,
    METRIC_NAMES,
    SuggestOptions,
    workload_info,
)
from advisor.outcome import Stop, StopReason, SuggestOutcome
from advisor.search_spaces.filters import machine_filter
from advisor.search_spaces.space import JointSpace, space_to_dict
from advisor.search_spaces.workloads import ModelRef
from advisor.storage.locks import sigint_deferred, storage_lock
from advisor.storage.urls import open_storage, resolve_storage
from advisor.study.claims import ClaimStore
from advisor.study.identity import check_same_question
from advisor.study.loop import TrialLoop
from advisor.study.naming import study_name_for
from advisor.study.predicted_only import screen_predicted_only
from advisor.study.screen import screen_pairs
from advisor.study.state import StudyState

if TYPE_CHECKING:
    import optuna
    from optuna.storages import BaseStorage
    from optuna.trial import FrozenTrial

# What an interrupted suggest with no finished trial keeps (the CLI prints it after "Aborted."):
# the local probes and the step and plan traces are cached as each is taken
RESUME_NOTE = "what was probed and traced so far is kept: the same command goes on from it"

Progress = Callable[[str, int, int], None]
ClaimsFactory = Callable[[Any, "optuna.Study"], ClaimStore]


def local_backend(
    options: SuggestOptions,
    storage: str | BaseStorage,
    space: JointSpace,
    progress: Progress | None = None,
) -> Backend:
    """The real back end: local probes (cached in ``storage``) and the performance model;
    each new probe is announced to ``progress`` as phase ``probe:WHAT`` (one line, in place),
    with how many of the batch taken in one process are done (issue #50: the time left)."""
    from advisor.evaluation.local import LocalBackend

    def on_probe(text: str, done: int = 0, total: int = 1) -> None:
        if progress is not None:
            progress(f"probe:{text}", done, total)

    from advisor.remote.measured import remote_lookup

    backend = LocalBackend(
        storage,
        options.snapshot,
        iterations=options.probe_iterations,
        threads=options.threads,
        runtime_params=[p.name for p in space.hyperparameters if p.affects_runtime],
        on_probe=on_probe,
        # Issue #14: remote probes measured earlier (cached in the storage) replace the model
        # at their machine and batch; the ledger they were recorded in corrects the model.
        remote_lookup=remote_lookup(storage, options.probe_iterations, options.emulate_cloud),
        ledger_storage=storage if isinstance(storage, str) else resolve_storage(options.storage),
    )
    return backend


def run_suggest(
    options: SuggestOptions,
    backend: Backend | None = None,
    progress: Progress | None = None,
    storage: Any = None,
    before_probes: Callable[[], None] | None = None,
    claims: ClaimsFactory | None = None,
    clock: Callable[[], float] | None = None,
) -> SuggestOutcome:
    """Run (or resume) the study and return what happened; the trials stay in the storage.

    ``storage`` may be an Optuna storage object (tests, benchmarks); otherwise
    ``options.storage`` or the default SQLite file is used. ``claims(storage, study)`` makes the
    trial loop's claims store (default ``advisor.study.claims.Claims``: processes that share
    the storage lock; the service's workers on several hosts inject one the database
    enforces). The CLI, the Python API and the service's workers all run studies here.
    ``clock`` (seconds) is what ``--timeout`` is measured on: the back end's
    (``time.monotonic``, or a replay back end's simulated clock) unless given.
    ``before_probes`` (issue #36: the first answer) is called once before the local back end
    times its first probe (never when every probe is cached, nor with another back end).
    """
    import optuna

    from advisor.search_spaces.loader import default_space
    from advisor.study.samplers import make_sampler

    clock = clock or (backend.clock if backend is not None else time.monotonic)
    started = clock()
    deadline = None if options.timeout_s is None else started + options.timeout_s
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    objective = options.resolved_objective
    workload = workload_info(options)
    check_runnable(options)  # issue #28: a missing framework or module is one line, at once
    space = machine_filter(options, options.space or default_space(workload.name))
    if space.workload != workload.name and not ModelRef(options.model).is_user:
        raise AdvisorError(
            f"The space is for '{space.workload}' but the model is '{workload.name}'.",
            f"use --model {space.workload} or a space written for {workload.name}.",
        )
    if isinstance(storage, str):  # a URL: as --storage
        options, storage = replace(options, storage=storage), None
    url = resolve_storage(options.storage) if storage is None else "(in memory)"
    lock_url = url if storage is None else None  # a storage object is this process's own
    storage_obj = storage if storage is not None else open_storage(url)
    if backend is None:
        backend = local_backend(options, storage_obj, space, progress)
    from advisor.prediction.step.plan import check_precision, plan_fields

    backend.configure(RunSettings(
        deadline=deadline, clock=clock, precision=check_precision(options.precision),
        plan_fields=plan_fields(options.plan),  # issue #35: the rest fixed, or searched
        before_probes=before_probes,  # issue #36: read once by evaluation.probe_batch.prefetch
    ))  # fmt: skip
    candidates = backend.candidates(space, options.include_previous_generation,
                                    options.max_nodes)  # issues #27, #49  # fmt: skip
    if not candidates:
        raise no_machine_error(options)
    name = study_name_for(options, workload, space, backend.snapshot)
    study, resumed = open_study(options, storage_obj, lock_url, name, workload, space, backend)
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
        left_out=dict(backend.left_out),  # issue #27
    )
    directions = study.directions
    state = StudyState(study, make_sampler(options.sampler, options.seed), list(directions))
    last_run = study.user_attrs.get("last_run") or {}
    # A study that stopped on its own is done: the same command gives the same answer,
    # unless earlier transient probe failures are to be retried (a fixed model).
    stopped_before = resumed and bool(last_run.get("final")) and not state.retrying
    try:
        stop: Stop | None = screen_pairs(outcome, backend, progress, deadline, clock)
        if stop is None:
            outcome.predicted_only = screen_predicted_only(outcome, backend)  # issue #47
        if stop is None and options.cloud_probes:  # issue #14: measure the best for real
            from advisor.remote.cloud_probes import run_cloud_probes

            cloud = run_cloud_probes(outcome, backend, progress, deadline, clock=clock)
            outcome.cloud = cloud.to_dict()
            state.refresh()  # their spend counts against the probe budget
        if stop is None:
            store = claims(storage_obj, study) if claims is not None else None
            search = TrialLoop(
                outcome, backend, storage_obj, state, lock_url, progress, deadline, store, clock
            )
            if stopped_before and options.trials is None:
                stop = Stop(
                    StopReason.RESUMED,
                    f"the study had already stopped ({last_run.get('stop')}) after "
                    f"{state.finished} trials; no new trials (--trials N adds N)",
                )
            else:
                n = options.trials if options.trials is not None else DEFAULT_TRIALS
                stop = search.run(n, extend=stopped_before)
    except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM (Terminated) under the CLI
        terminated = isinstance(exc, Terminated)
        stop = Stop(StopReason.TERMINATED if terminated else StopReason.INTERRUPTED)
    with sigint_deferred():
        state.refresh()
        if stop.reason is not StopReason.RESUMED:
            study.set_user_attr("last_run", {"stop": stop.text, "final": stop.reason.final})
    if progress:
        progress("trials", 1, 1)
    outcome.stop = stop
    if not stop.reason.interrupted and stop.reason is not StopReason.SCREEN_TIMEOUT:
        from advisor.study.more_nodes import more_nodes  # issue #49: the report's hint

        outcome.more_nodes = more_nodes(outcome, backend)
    outcome.new_probes = backend.new_probes
    outcome.probe_spent_usd = state.spent_usd
    failures = dict(state.failures)
    for batch, failed in failed_probes(outcome.screen.values()).items():
        failures.setdefault(batch, failed)
    outcome.probe_failures = summary(failures, space.batch_sizes)
    outcome.wall_s = clock() - started
    if stop.reason.interrupted and not _complete(study):
        # nothing finished to report: the CLI says "Aborted." (130) or "Terminated." (143),
        # and that the work done is kept (probes and traces are cached as they are taken)
        stopped = Terminated if stop.reason is StopReason.TERMINATED else KeyboardInterrupt
        raise stopped(RESUME_NOTE)
    if failures and not stop.reason.interrupted:
        _refuse_if_nothing_ran(outcome)
    return outcome


def check_runnable(options: SuggestOptions) -> None:
    """Before any probe: the framework is installed, a user module can be found, and a space
    names only hyperparameters the user's builder takes (a built-in's: when loaded)."""
    from advisor.search_spaces.workloads.available import check_framework, check_user_module

    check_framework(options.framework)
    if not ModelRef(options.model).is_user:
        return
    check_user_module(options.model)
    if options.space is not None and options.space.hyperparameters:
        from advisor.search_spaces.workloads.hyperparameters import check_names, user_params

        names = [p.name for p in options.space.hyperparameters]
        check_names(options.model, names, user_params(options.model))


def no_machine_error(options: SuggestOptions) -> AdvisorError:
    """Nothing matches: name the filters given (issue #28) and how to widen them."""
    given = [
        f"{flag} {value}"
        for flag, value in (
            ("--gpus", options.gpus),
            ("--cloud", options.cloud),
            ("--region", options.region),
        )
        if value is not None
    ]
    if options.spot is not None:
        given.append("--spot" if options.spot else "--no-spot")
    what = " with ".join(given) + " and " if given else ""
    return AdvisorError(
        f"No machine matches {what}the space's machine filter.",
        "widen the filters (`advisor catalog --accelerator NAME` lists who sells what) or "
        "'machines' in the space file (providers, accelerators, max_price, max_gpus).",
    )


def _complete(study: optuna.Study) -> list[FrozenTrial]:
    import optuna

    return study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))


def open_study(
    options: SuggestOptions,
    storage: Any,
    lock_url: str | None,
    name: str,
    workload: WorkloadInfo,
    space: JointSpace,
    backend: Backend,
) -> tuple[optuna.Study, bool]:
    """Create or load the study under the storage lock (processes may start together): a
    new one gets its directions, metric names and ``study_attrs``; a resumed one must ask the
    same question. Returns (study, resumed)."""
    import optuna
    from optuna.study import StudyDirection

    from advisor.study.samplers import make_sampler

    objective = options.resolved_objective
    directions = [StudyDirection.MINIMIZE] * (2 if objective == "pareto" else 1)
    with storage_lock(lock_url), sigint_deferred():
        # One lookup by name, not a summary of every study (issue #30: that grew with them).
        try:
            storage.get_study_id_from_name(name)
            resumed = True
        except KeyError:
            resumed = False
        study = optuna.create_study(
            study_name=name,
            storage=storage,
            directions=directions,
            sampler=make_sampler(options.sampler, options.seed),
            load_if_exists=True,
        )
        wanted = study_attrs(options, workload, space, backend)
        if resumed:  # issue #28: a --study-name another question used is refused
            check_same_question(name, study.user_attrs, wanted)
        else:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                study.set_metric_names(METRIC_NAMES[objective])
            for key, value in wanted.items():
                study.set_user_attr(key, value)
    return study, resumed


def study_attrs(
    options: SuggestOptions, workload: WorkloadInfo, space: JointSpace, backend: Backend
) -> dict[str, Any]:
    """The study's own attributes, written when it is created (the service's workers that
    join a study write the same)."""
    return {
        "workload": workload.name,
        "framework": workload.framework,
        "space": space_to_dict(space),
        "catalog_snapshot": backend.snapshot,
        "budget_usd": options.budget_usd,
        "deadline_s": options.deadline_s,
        "objective": options.resolved_objective,
        "epochs": options.epochs,
        "at_batch": options.at_batch,  # issue #19
        "epochs_at": sorted(options.epochs_at),  # issue #19
        "n_train": workload.n_train,
        "n_val": workload.n_val,
        "backend": backend.name,
    }


def _refuse_if_nothing_ran(outcome: SuggestOutcome) -> None:
    """Every probe failed and nothing finished: say why in one line instead of a report."""
    if _complete(outcome.study) or any(ev.ok for ev in outcome.screen.values()):
        return
    lines = "; ".join(f["text"] for f in outcome.probe_failures)
    first = outcome.probe_failures[0]
    see = (
        f"run `advisor probe --model {outcome.workload.name} --batch-size "
        f"{first['batch_sizes'][0]}` to see the failure, fix it and re-run"
    )
    fix = f"{first['fix']}, then re-run" if first.get("fix") else see
    raise AdvisorError(
        f"Every probe of {outcome.workload.name} failed, so nothing can be recommended: {lines}.",
        f"{fix} (failed probes other than out-of-memory and NaN are retried on the next run).",
    )
