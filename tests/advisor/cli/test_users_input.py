"""Issue #36, section 1: what a user meets in the report and the help, through the CLI. Each
test failed on the code before the issue."""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any

import pytest
from perf_fixtures import probe, with_synthetic_trace

from .conftest import Replay, run


def test_the_report_keeps_to_columns(
    replay: Replay, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`COLUMNS=80` (before: piped output was 200 wide whatever COLUMNS said; 303 bytes of
    table rule)."""
    db = f"sqlite:///{tmp_path / 's.db'}"
    for columns in (80, 120):
        monkeypatch.setenv("COLUMNS", str(columns))
        outcome = run(*replay.args("--budget", "5", "--storage", db))
        assert outcome.code == 0, outcome
        widths = [len(line) for line in outcome.out.splitlines()]
        assert widths and max(widths) <= columns, (columns, max(widths))
        if columns == 120:  # wider is used when given: the long lines are not cut to 80
            assert max(widths) > 80


def test_cloud_probes_that_did_not_run_say_why_in_the_default_report(
    replay: Replay, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: "0 job(s) (0 new), USD 0.0000 charged ..." and exit 0; why only with --verbose."""
    monkeypatch.setenv("COLUMNS", "1000")
    outcome = run(*replay.args("--budget", "5", "--cloud-probes", "2"))
    assert outcome.code == 0, outcome
    line = next(x for x in outcome.out.splitlines() if x.startswith("cloud probes"))
    assert "none ran: cloud probes need the local back end and a screen" in line, line
    assert "0 job(s)" not in line


def test_the_tune_help_names_the_pruner_the_docs_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "2000")
    outcome = run("suggest", "--help")
    assert outcome.code == 0
    tune = " ".join(re.split(r"\n\s+--tune", outcome.out, maxsplit=1)[1].split("\n  -")[0].split())
    assert "Hyperband" in tune and "successive halving" not in tune, tune


def test_predict_prints_no_optuna_log_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A home whose studies.db has no probe cache yet (before: "[I ...] A new study created in
    RDB with name: advisor-probe-cache" between the probe and the table)."""
    import optuna

    import advisor.cli.probe_view as probe_view
    import advisor.evaluation.untimed as untimed

    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("ADVISOR_HOME", str(home))
    optuna.create_study(storage=f"sqlite:///{home / 'studies.db'}", study_name="other")
    optuna.logging.set_verbosity(optuna.logging.INFO)  # as a fresh process starts
    said: list[str] = []  # what Optuna's handler (stderr, bound at its creation) would print
    handler = logging.Handler()
    handler.emit = lambda record: said.append(record.getMessage())  # type: ignore[method-assign]
    monkeypatch.setattr(logging.getLogger("optuna"), "handlers", [handler])

    def measured(request: Any, show: bool) -> Any:  # the probe this machine would time
        return with_synthetic_trace(probe(batch=request.batch_size))

    monkeypatch.setattr(probe_view, "run_with_progress", measured)
    monkeypatch.setattr(untimed, "decide", lambda *a, **k: None)  # it fits this machine
    outcome = run("predict", "--model", "fcn", "--batch-size", "512", "--instances", "p3.2xlarge")
    assert outcome.code == 0, outcome
    assert "p3.2xlarge" in outcome.out
    assert said == [], said
    assert not re.search(r"^\[[IW] \d{4}-", outcome.out + outcome.err, re.M)
