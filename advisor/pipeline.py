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
    save_study_note(outcome.study, report)  # the dashboard shows the same report
    return report
