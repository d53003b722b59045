"""Issue #28: `advisor submit --study` submits the machine the report recommended, even when
that is a screened machine x batch no trial evaluated (it read the trials alone before, and
submitted another machine without a word)."""

from __future__ import annotations

import json
from pathlib import Path

from advisor.evaluation.replay import ReplayEntry, ReplayTable
from advisor.intervals import Interval

from ..cli.conftest import instance, run

FAST = "sagemaker:ml.p3.2xlarge"
STEADY = "sagemaker:ml.g4dn.xlarge"


def _table() -> ReplayTable:
    """The screen predicts ml.p3.2xlarge fastest, but its trial runs twice as long as
    predicted; ml.g4dn.xlarge is then ranked first on its screen alone."""
    insts = (
        instance(FAST, 1, 3.83, None, "V100", "us-east-1"),
        instance(STEADY, 1, 0.74, None, "T4", "us-east-1"),
    )

    def entry(machine: str, batch: int, measured: float, predicted: float) -> ReplayEntry:
        return ReplayEntry(
            machine,
            batch,
            Interval(measured, measured * 0.95, measured * 1.05),
            predicted=Interval(predicted, predicted * 0.9, predicted * 1.1),
            probe_s=30.0,
        )

    entries = (entry(FAST, 512, 1400.0, 600.0), entry(STEADY, 512, 900.0, 800.0))
    return ReplayTable(insts, entries, snapshot="test-2021-02", epochs=10)


def test_submit_takes_the_reports_recommendation(tmp_path: Path) -> None:
    path = tmp_path / "table.json"
    _table().save(path)
    space = tmp_path / "space.yaml"
    space.write_text(
        "workload: fcn\nbatch_sizes: [512]\nmachines:\n  include_local: false\n"
        "hyperparameters:\n  lr: {type: float, low: 0.01, high: 0.3, log: true}\n"
    )
    storage = f"sqlite:///{tmp_path / 's.db'}"
    result = run(
        "suggest", "--model", "fcn", "--budget", "5000", "--trials", "1", "--space", str(space),
        "--storage", storage, "--backend", f"replay:{path}", "--json",
    )  # fmt: skip
    assert result.code == 0, result
    report = json.loads(result.out)
    rec = report["recommended"]
    assert rec["machine"] == STEADY and rec["trial"] is None  # a screened pair, not a trial
    submit = run(
        "submit", "--provider", "sagemaker", "--study", report["study"], "--storage", storage,
        "--dry-run",
    )  # fmt: skip
    assert submit.code == 0, submit
    request = submit.out
    assert '"ml.g4dn.xlarge"' in request and '"ml.p3.2xlarge"' not in request
    assert "512" in request
