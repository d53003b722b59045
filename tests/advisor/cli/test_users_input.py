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


def _fake_tune(monkeypatch: pytest.MonkeyPatch, stop_after: int | None = None) -> list[float]:
    """`--tune`'s short runs by the fake trainer on its own clock (tests/helpers/short_runs.py);
    with ``stop_after`` the process gets SIGTERM during that run. Returns the budgets asked."""
    import functools

    from short_runs import Clock, fake_trainer

    from advisor.accuracy import step
    from advisor.accuracy.plan import SampleCost
    from advisor.errors import Terminated

    clock, calls, budgets = Clock(), [], []  # type: ignore[var-annotated]
    train = fake_trainer(clock, 1.0, calls=calls)

    def trainer(req: Any, on_check: Any) -> Any:
        if stop_after is not None and len(calls) >= stop_after:
            raise Terminated  # what SIGTERM raises under the CLI (terminate_as_exception)
        return train(req, on_check)

    real = functools.partial(
        step.tune_step, train=trainer, cost=SampleCost(1 / 2000, 1 / 6000, "test"), clock=clock
    )

    def tune_step(outcome: Any, rec: Any, rows: Any, budget_s: float, **kw: Any) -> Any:
        budgets.append(budget_s)
        return real(outcome, rec, rows, budget_s, **kw)

    monkeypatch.setattr(step, "tune_step", tune_step)
    return budgets


def _with_lr(replay: Replay) -> None:
    """The replay space with a hyperparameter --tune judges."""
    text = replay.space.read_text()
    if "hyperparameters" not in text:
        replay.space.write_text(
            text + "hyperparameters:\n  lr: {type: float, low: 0.001, high: 0.3, log: true}\n"
        )


@pytest.mark.slow  # two studies with their short runs: about 13 s on the shared machine
def test_a_signal_during_tune_keeps_the_report_with_what_finished(
    replay: Replay, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: "Aborted." and no report, although the machine answer was known."""
    import json

    _fake_tune(monkeypatch, stop_after=3)
    _with_lr(replay)
    db = f"sqlite:///{tmp_path / 's.db'}"
    outcome = run(*replay.args("--budget", "5", "--tune", "2m", "--storage", db, "--json"))
    assert outcome.code == 143, outcome  # SIGTERM, as the help says
    report = json.loads(outcome.out)
    assert report["interrupted"] == "SIGTERM" and report["recommended"]["machine"]
    assert "--tune interrupted (SIGTERM) after 3 new short run(s)" in report["tune_note"]
    # the same command goes on from them: no kept partial answer, the runs are in the study
    _fake_tune(monkeypatch)
    again = run(*replay.args("--budget", "5", "--tune", "2m", "--storage", db, "--json"))
    assert again.code == 0, again
    assert json.loads(again.out)["interrupted"] is None


def test_timeout_bounds_tune(
    replay: Replay, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--timeout 30s --tune 10m`: the short runs get what is left of the 30 s (before: 600 s,
    still running at 150 s)."""
    budgets = _fake_tune(monkeypatch)
    _with_lr(replay)
    db = f"sqlite:///{tmp_path / 's.db'}"
    args = replay.args("--budget", "5", "--tune", "10m", "--timeout", "30s", "--storage", db)
    outcome = run(*args)
    assert outcome.code == 0, outcome
    assert len(budgets) == 1 and 0 < budgets[0] <= 30, budgets


@pytest.mark.parametrize(
    ("signal_name", "code", "said"), [("SIGTERM", 143, "Terminated."), ("SIGINT", 130, "Aborted.")]
)
def test_a_signal_during_screening_exits_as_the_help_says_and_tells_what_is_kept(
    replay: Replay, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, signal_name: str, code: int,
    said: str,
) -> None:  # fmt: skip
    """Nothing finished yet: "Terminated." and 143 (SIGTERM), "Aborted." and 130 (Ctrl-C), as
    the help says (before: click turned SIGTERM's exception into its Abort, "Aborted." and 130;
    seen with a real SIGTERM 12 s into `advisor suggest --model fcn --budget 5`), each saying
    that the work done is kept and the same command goes on; it does."""
    from advisor.errors import Terminated
    from advisor.evaluation.replay import ReplayBackend
    from advisor.study.run import RESUME_NOTE

    def screen(*_a: Any, **_k: Any) -> Any:
        # what SIGTERM raises under the CLI (terminate_as_exception), and Ctrl-C
        raise Terminated if signal_name == "SIGTERM" else KeyboardInterrupt

    db = f"sqlite:///{tmp_path / 's.db'}"
    with monkeypatch.context() as patched:
        patched.setattr(ReplayBackend, "screen", screen)
        outcome = run(*replay.args("--budget", "5", "--storage", db))
    # progress lines come first when the run passes the quiet seconds (a loaded machine)
    lines = [line for line in outcome.err.strip().splitlines() if not line.startswith("[")]
    kept = f"{said} Stopped before the search finished; {RESUME_NOTE}."
    assert outcome.code == code and [line for line in lines if line] == [kept], outcome
    again = run(*replay.args("--budget", "5", "--storage", db))
    assert again.code == 0 and "recommended" in again.out, again
