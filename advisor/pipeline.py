"""The one ``suggest`` pipeline: the CLI, the Python API and the service all call it.

``suggest`` runs (or resumes) the study (screen, cloud probes, trials: ``advisor.study.run``),
checks that some candidate fits the budget and deadline, builds the report
(``advisor.report.build``) and writes it into the study's note for optuna-dashboard
(``advisor.report.dashboard``). It returns the report: the JSON document
``advisor suggest --json`` prints.
"""

from __future__ import annotations

from typing import Any

from advisor.evaluation.contract import Backend
from advisor.options import SuggestOptions
from advisor.report.build import build_report, check_feasible
from advisor.report.dashboard import save_study_note
from advisor.report.hyperparameters import attach as attach_hyperparameters
from advisor.study.run import Progress, run_suggest


def suggest(
    options: SuggestOptions | None = None,
    *,
    backend: Backend | None = None,
    progress: Progress | None = None,
    storage: Any = None,
    **fields: Any,
) -> dict[str, Any]:
    """``advisor suggest`` as a function: run (or resume) the study and return the report.

    Pass ``SuggestOptions`` or its fields (``advisor.suggest(model="fcn", budget_usd=5)``);
    ``backend`` replaces the local probes (e.g. ``advisor.evaluation.replay.ReplayBackend``);
    ``storage`` is a storage URL or an Optuna storage object (default: ``options.storage``,
    else the SQLite file in ``$ADVISOR_HOME``); ``progress(phase, done, total)`` hears each
    phase. Raises AdvisorError when no candidate fits the budget or deadline.
    """
    if options is None:
        options = SuggestOptions(**fields)
    elif fields:
        raise TypeError("pass SuggestOptions or its fields, not both")
    outcome = run_suggest(options, backend, progress=progress, storage=storage)
    check_feasible(outcome)
    report = build_report(outcome)
    if options.tune_s is not None and report.get("recommended") and not report.get("interrupted"):
        from advisor.accuracy.step import tune_step  # issue #29: short accuracy trials

        rows = report.get("epochs_per_batch") or []
        tune_step(outcome, report["recommended"], rows, options.tune_s, progress=progress)
    attach_hyperparameters(report, outcome.study)  # what the study's short runs found
    save_study_note(outcome.study, report)  # the dashboard shows the same report
    return report
