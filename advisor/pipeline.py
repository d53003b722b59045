"""The one ``suggest`` pipeline: the CLI, the Python API and the service all call it.

``suggest`` runs (or resumes) the study (screen, cloud probes, trials: ``advisor.study.run``),
checks that some candidate fits the budget and deadline, builds the report
(``advisor.report.build``) and writes it into the study's note for optuna-dashboard
(``advisor.report.dashboard``). It returns the report: the JSON document
``advisor suggest --json`` prints.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from advisor.evaluation.contract import Backend
from advisor.options import SuggestOptions
from advisor.progress import label
from advisor.report.build import build_report, check_feasible
from advisor.report.hyperparameters import attach as attach_hyperparameters
from advisor.report.study_note import save_study_note
from advisor.study.answer_cache import answer_for, keep, sqlite_path
from advisor.study.run import Progress, run_suggest
from advisor.study.selection import TIE_BAND_ATTR
from advisor.tuning.pick import RECOMMENDATION, recommendation_attr


def suggest(
    options: SuggestOptions | None = None,
    *,
    backend: Backend | None = None,
    progress: Progress | None = None,
    storage: Any = None,
    on_first_answer: Callable[[dict[str, Any]], None] | None = None,
    clock: Callable[[], float] | None = None,
    **fields: Any,
) -> dict[str, Any]:
    """``advisor suggest`` as a function: run (or resume) the study and return the report.

    Pass ``SuggestOptions`` or its fields (``advisor.suggest(model="fcn", budget_usd=5)``);
    ``backend`` replaces the local probes (e.g. ``advisor.evaluation.replay.ReplayBackend``);
    ``storage`` is a storage URL or an Optuna storage object (default: ``options.storage``,
    else the SQLite file in ``$ADVISOR_HOME``); ``progress(phase, done, total)`` hears each
    phase. Raises AdvisorError when no candidate fits the budget or deadline.
    ``on_first_answer(report)`` (issue #36) hears the first answer, from the operator trace
    alone, before the local probes run (``first_answer``): only with the local back end,
    without ``timeout_s``, and when a probe is to be timed (a warm re-run answers soon anyway).
    ``clock`` (seconds; default the back end's, else the wall clock) is what ``--timeout``,
    ``--tune`` and the report's ``wall_s`` and ``timings`` (issue #50: the whole call, and
    what took it) are measured on.
    """
    if options is None:
        options = SuggestOptions(**fields)
    elif fields:
        raise TypeError("pass SuggestOptions or its fields, not both")
    if backend is None and storage is None:  # issue #28: a stopped study answers at once
        kept = answer_for(options)
        if kept is not None:
            return kept
    tune_clock = clock  # an explicit clock is the short runs' too (tests: a fake trainer's)
    clock = clock or (backend.clock if backend is not None else time.monotonic)
    started = clock()  # --timeout counts from here, --tune's short runs included
    timings: dict[str, float] = {}  # issue #50: what took the call's time
    hook = None
    # the first answer would run outside --timeout's bound: none with one
    if on_first_answer is not None and backend is None and options.timeout_s is None:
        heard = on_first_answer

        def hook() -> None:  # called once, before the first local probe is timed
            began = clock()
            early = first_answer(options, progress)
            timings["first answer"] = clock() - began
            if early is not None:
                heard(early)

    from advisor.evaluation.user_code import arms_length

    # issue #50: a call into the user's code (a trace) ends by --timeout's deadline too
    deadline = None if options.timeout_s is None else time.time() + options.timeout_s
    with arms_length(options.model if backend is None else None, deadline=deadline):
        outcome = run_suggest(
            options, backend, progress=progress, storage=storage, before_probes=hook, clock=clock
        )
        timings["search"] = max(0.0, clock() - started - timings.get("first answer", 0.0))
        check_feasible(outcome)
        report = build_report(outcome)
        tune = options.tune_s is not None and report.get("recommended")
        if tune and not report.get("interrupted"):
            began = clock()
            _tune(outcome, report, started, progress, clock, tune_clock)
            timings["--tune"] = clock() - began
    attach_hyperparameters(report, outcome.study)  # what the study's short runs found
    _timed(report, timings, clock() - started)
    save_study_note(outcome.study, report)  # the dashboard shows the same report
    saved = recommendation_attr(report)  # issue #28: `advisor submit --study` submits it
    if saved is not None and outcome.study.user_attrs.get(RECOMMENDATION) != saved:
        outcome.study.set_user_attr(RECOMMENDATION, saved)
    if outcome.study.user_attrs.get(TIE_BAND_ATTR) != report["tie_share"]:  # issue #36
        outcome.study.set_user_attr(TIE_BAND_ATTR, report["tie_share"])
    if not report.get("interrupted"):  # a partial answer is never the kept one
        _keep_answer(outcome, report)
    return report


def first_answer(
    options: SuggestOptions, progress: Progress | None = None
) -> dict[str, Any] | None:
    """Issue #36: the report over the GPU machines from the operator trace alone
    (``advisor.evaluation.trace_only``), in a study kept in memory (nothing is stored: the
    final run takes its own probes); None when no GPU machine fits or the model cannot be
    traced (the final answer then comes alone)."""
    from dataclasses import replace

    import optuna

    from advisor.errors import AdvisorError
    from advisor.evaluation.trace_only import TraceOnlyBackend
    from advisor.probes.isolated import UserCodeError

    optuna.logging.set_verbosity(optuna.logging.WARNING)  # as run_suggest: no INFO lines
    memory = optuna.storages.InMemoryStorage()
    quick = replace(options, tune_s=None, cloud_probes=0, storage=None)
    try:
        backend = TraceOnlyBackend(
            memory, options.snapshot, iterations=options.probe_iterations, threads=options.threads
        )
        outcome = run_suggest(quick, backend, progress=_first(progress), storage=memory)
        _interrupt_again(outcome)
        check_feasible(outcome)
    except UserCodeError:  # issue #50: the model exited, crashed or hung: so would its probe
        raise
    except (AdvisorError, RuntimeError):
        return None
    report = build_report(outcome)
    report["first_answer_basis"] = backend.basis()  # what its rows rest on, in words
    return report if report.get("recommended") else None


def _interrupt_again(outcome: Any) -> None:
    """Ctrl-C (or SIGTERM) met the first answer's own study, which stopped on it as a study
    does: it is the command's, raised again for the run around it (else the run went on as if
    the key had not been pressed, with the first answer dropped)."""
    from advisor.errors import Terminated
    from advisor.outcome import StopReason

    reason = outcome.stop.reason if outcome.stop is not None else None
    if reason is StopReason.TERMINATED:
        raise Terminated()
    if reason is StopReason.INTERRUPTED:
        raise KeyboardInterrupt()


def _first(progress: Progress | None) -> Progress | None:
    """The first answer's stages on a line of their own (issue #50)."""
    if progress is None:
        return None
    heard = progress

    def hook(phase: str, done: int, total: int) -> None:
        heard(f"first:first answer from the operator trace: {label(phase, total)}", done, total)

    return hook


def _timed(report: dict[str, Any], timings: dict[str, float], wall_s: float) -> None:
    """Issue #50: the report's ``wall_s`` is the whole call's (the search, the first answer,
    ``--tune``, the report), ``timings`` what took it (the rest: ``report``)."""
    timings["report"] = max(0.0, wall_s - sum(timings.values()))
    report["wall_s"] = round(wall_s, 3)
    report["timings"] = {k: round(v, 3) for k, v in timings.items()}


def _tune(
    outcome: Any,
    report: dict[str, Any],
    started: float,
    progress: Progress | None,
    clock: Callable[[], float] = time.monotonic,
    tune_clock: Callable[[], float] | None = None,
) -> None:
    """Issue #29's short accuracy runs, bounded by what ``--timeout`` leaves (issue #36: they
    ran on past it). Ctrl-C or SIGTERM during them keeps the report with what finished: the
    machine answer, the short runs the study holds, and ``interrupted`` (exit 130/143)."""
    from advisor.accuracy.step import tune_step
    from advisor.accuracy.trials import accuracy_trials
    from advisor.errors import Terminated

    options = outcome.options
    budget = float(options.tune_s)
    before = len(accuracy_trials(outcome.study))
    if options.timeout_s is not None:
        left = options.timeout_s - (clock() - started)
        if left <= 0:
            _tune_note(report, f"--tune not run: --timeout {options.timeout_s:g} s ran out first")
            return
        budget = min(budget, _spent_before(outcome, report) + left)
    rows = report.get("epochs_per_batch") or []
    try:
        kw: dict[str, Any] = {} if tune_clock is None else {"clock": tune_clock}
        tune_step(outcome, report["recommended"], rows, budget, progress=progress, **kw)
    except KeyboardInterrupt as exc:  # the machine answer stands; the finished runs are kept
        report["interrupted"] = "SIGTERM" if isinstance(exc, Terminated) else "SIGINT"
        new = accuracy_trials(outcome.study)[before:]
        done = sum(t.ended != "interrupted" for t in new)
        _tune_note(
            report,
            f"--tune interrupted ({report['interrupted']}) after {done} new short run(s); "
            "they are kept in the study and the same command goes on from them",
        )


def _spent_before(outcome: Any, report: dict[str, Any]) -> float:
    """This machine's time the study's short runs of the plan ``tune_step`` reuses already
    took (``--tune TIME`` counts them), so ``--timeout`` bounds only this run's."""
    from advisor.accuracy.plan import TunePlan
    from advisor.accuracy.step import STUDY_ATTR
    from advisor.accuracy.trials import accuracy_trials, spent_s

    stored = outcome.study.user_attrs.get(STUDY_ATTR)
    try:
        plan = TunePlan.from_dict(stored["plan"])
    except (KeyError, TypeError, ValueError):
        return 0.0
    batch = int(report["recommended"]["batch_size"])
    if plan.workload != outcome.workload.name or plan.recommended_batch != batch:
        return 0.0  # a new plan: nothing spent on it yet
    return spent_s(accuracy_trials(outcome.study, plan.id))


def _tune_note(report: dict[str, Any], text: str) -> None:
    report["tune_note"] = text
    report["notes"] = [*report.get("notes", []), text]


def _keep_answer(outcome: Any, report: dict[str, Any]) -> None:
    """Issue #28: keep the answer with its inputs' fingerprint (``advisor.study.answer_cache``)
    when the study is a SQLite file and its snapshot a catalog's; a re-run of a study that
    stopped then answers from it."""
    from advisor.errors import AdvisorError
    from advisor.providers.catalog import snapshot_dir

    db = sqlite_path(outcome.storage_url)
    try:
        _, folder = snapshot_dir(outcome.snapshot)
    except AdvisorError:  # a replay table's snapshot is no catalog's
        return
    wl = outcome.workload
    keep(outcome.study, db, wl.name, wl.framework, folder, report)
