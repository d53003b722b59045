"""Issue #14 through `advisor suggest` (replay back end): the report shows the start-up as its
own term, and --budget / --deadline judge the whole job (start-up + training)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from advisor.providers.overheads import overheads_for
from replay_tables import instance

from advisor.cli.main import main
from advisor.evaluation.contract import Evaluation
from advisor.evaluation.replay import ReplayEntry, ReplayTable
from advisor.intervals import Interval
from advisor.options import SuggestOptions, workload_info
from advisor.prediction.run.iteration_model import priced
from advisor.remote.rules import leader_stands

SPACE = "workload: fcn\nbatch_sizes: [256]\nmachines:\n  spot: false\n"
# 10 epochs of fcn at batch 256 (replayed): 20 s on a SageMaker V100 at USD 36/h (USD 0.01 a
# second: training alone USD 0.20), 100 s on an EC2 V100 at USD 3.60/h, 3000 s here.
TRAINING = {"sagemaker:ml.p3.2xlarge": 20.0, "ec2:p3.2xlarge": 100.0, "local:local": 3000.0}
PRICES = {"sagemaker:ml.p3.2xlarge": 36.0, "ec2:p3.2xlarge": 3.6, "local:local": 0.0}


@pytest.fixture
def table(tmp_path: Path) -> Path:
    insts = tuple(instance(k, 0 if k.startswith("local") else 1, p) for k, p in PRICES.items())
    entries = tuple(
        ReplayEntry(m, 256, Interval.exact(t), predicted=Interval.exact(t), probe_s=1.0)
        for m, t in TRAINING.items()
    )
    path = tmp_path / "table.json"
    ReplayTable(insts, entries, snapshot="test-2021-02", epochs=10).save(path)
    return path


def _suggest(
    capsys: pytest.CaptureFixture[str], table: Path, tmp_path: Path, *args: str
) -> tuple[int, str, str]:
    space = tmp_path / "space.yaml"
    if not space.exists():
        space.write_text(SPACE)
    argv = ["suggest", "--model", "fcn", "--space", str(space), "--verbose"]
    argv += ["--backend", f"replay:{table}"]
    try:
        main([*argv, *args])
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def _expected(machine: str) -> tuple[float, float]:
    """(wall s, USD) of the job by the figures in providers/overheads.py, by hand: all the
    start-up terms in the time, the billed ones (+ training) in the cost, per-second billing."""
    service = machine.split(":")[0]
    provider = {"sagemaker": "aws", "ec2": "aws", "local": "local"}[service]
    wl = workload_info(SuggestOptions("fcn"))
    over = overheads_for(provider, service, wl.data_bytes)
    wall = sum(t.seconds.value for t in over.terms)
    billed = sum(t.seconds.value for t in over.terms if t.billed)
    billed_total = max(billed + TRAINING[machine], over.billing.minimum_s)
    return wall + TRAINING[machine], billed_total * PRICES[machine] / 3600


def _ranked(
    capsys: pytest.CaptureFixture[str], table: Path, tmp_path: Path, budget: str
) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """``suggest --budget BUDGET --json`` on the table: the report and its rows by machine."""
    code, out, _ = _suggest(capsys, table, tmp_path, "--budget", budget, "--json")
    assert code == 0
    report = json.loads(out)
    return report, {r["machine"]: r for r in report["ranking"]}


def test_report_shows_start_up_and_training_and_the_total(
    capsys: pytest.CaptureFixture[str], table: Path, tmp_path: Path, _advisor_home: Path
) -> None:
    report, rows = _ranked(capsys, table, tmp_path, "5")
    assert set(rows) == set(TRAINING)
    for machine, r in rows.items():
        wall, usd = _expected(machine)
        assert r["runtime_s"]["value"] == pytest.approx(wall)
        assert r["cost_usd"]["value"] == pytest.approx(usd)
        assert r["training_s"]["value"] == pytest.approx(TRAINING[machine])
        assert r["startup_s"]["value"] + r["training_s"]["value"] == pytest.approx(wall)
        for bound in ("low", "high"):  # the intervals add the terms' own
            total = r["startup_s"][bound] + r["training_s"][bound]
            assert r["runtime_s"][bound] == pytest.approx(total)
    sm = rows["sagemaker:ml.p3.2xlarge"]
    assert sm["startup_s"]["high"] - sm["startup_s"]["low"] > 100  # priors: a wide interval
    assert "start-up" in sm["limiting"]  # 20 s of training behind ~2.5 min of start-up
    assert rows["local:local"]["startup_s"]["value"] == 0  # this machine has none
    services = report["overheads"]["services"]
    assert [t["status"] for t in services["sagemaker"]["terms"]] == ["prior"] * 3
    assert services["local"]["terms"] == []

    code, out, _ = _suggest(capsys, table, tmp_path, "--budget", "5")
    assert code == 0
    header = next(line for line in out.splitlines() if "machine" in line and "batch" in line)
    assert header.index("start-up") < header.index("training") < header.index("time")
    words = " ".join(out.split())
    assert "Start-up on sagemaker: provisioning 90 s (45-300; not billed; prior:" in words
    assert "billed per second (documented: AWS SageMaker pricing page" in words
    assert "Data download before training on every cloud machine" in words
    assert "Start-up on local" not in words


def test_budget_judges_the_total_a_run_whose_start_up_does_not_fit_is_infeasible(
    capsys: pytest.CaptureFixture[str], table: Path, tmp_path: Path, _advisor_home: Path
) -> None:
    # SageMaker: training alone USD 0.20 fits USD 0.50 and is the fastest training (20 s);
    # with its billed start-up (image pull 60 s + data 3 s) it costs USD 0.83 and does not.
    report, rows = _ranked(capsys, table, tmp_path, "0.5")
    sm = rows["sagemaker:ml.p3.2xlarge"]
    assert sm["training_s"]["value"] * 36.0 / 3600 < 0.5 < sm["cost_usd"]["value"]
    assert sm["feasible"] is False
    assert report["recommended"]["machine"] == "ec2:p3.2xlarge"

    only_sm = tmp_path / "sm.yaml"
    only_sm.write_text(SPACE + "  include_local: false\n  services: [sagemaker]\n")
    code, _, err = _suggest(capsys, table, tmp_path, "--budget", "0.5", "--space", str(only_sm))
    assert code == 2
    assert "No candidate fits a budget of USD 0.5" in err
    _, usd = _expected("sagemaker:ml.p3.2xlarge")
    assert usd == pytest.approx(0.8334, abs=1e-4)  # (60 + 3.3 + 20) s x USD 36/h
    assert "raise --budget to at least 0.84" in err


def test_deadline_judges_the_total(
    capsys: pytest.CaptureFixture[str], table: Path, tmp_path: Path, _advisor_home: Path
) -> None:
    # 20 s of SageMaker training fits a 1-minute deadline; its job (2.9 min) does not, nor
    # EC2's (100 s + 108 s start-up: boot and, issue #27, the image pull), nor this
    # machine's 50 min.
    code, _, err = _suggest(capsys, table, tmp_path, "--deadline", "60s")
    assert code == 2
    assert "No candidate fits a deadline of 1.0 min" in err
    assert "extend --deadline to at least 2.9 min" in err  # SageMaker: the fastest job
    code, out, _ = _suggest(capsys, table, tmp_path, "--deadline", "4m", "--json")
    assert code == 0
    report = json.loads(out)
    # within 4 minutes, EC2 (208 s, USD 0.21) is cheaper than SageMaker (173 s, USD 0.83)
    assert report["recommended"]["machine"] == "ec2:p3.2xlarge"
    assert report["recommended"]["runtime_s"]["value"] == pytest.approx(
        _expected("ec2:p3.2xlarge")[0]
    )
    assert report["recommended"]["runtime_s"]["value"] <= 240


def _priced_ev(machine: str, training: Interval) -> Evaluation:
    """An Evaluation priced as the scorer prices it (EC2 start-up + training, fcn's data)."""
    over = overheads_for("aws", "ec2", workload_info(SuggestOptions("fcn")).data_bytes)
    runtime, cost, notes = priced(training, 3.06, service="ec2", overheads=over)
    return Evaluation(
        machine=machine,
        batch_size=256,
        runtime=runtime,
        cost=cost,
        source="modelled",
        epochs=10,
        price_per_hour=3.06,
        spot=False,
        probe_s=5.0,
        estimate=notes,
    )


def test_cloud_probes_early_stop_keeps_the_start_up_at_its_expected_value() -> None:
    # The start-up is one prior shared by every EC2 machine: a rival's optimistic bound is
    # its training's low end plus the expected start-up, not the start-up's low end too.
    options = SuggestOptions("fcn", budget_usd=5)
    leader = _priced_ev("ec2:g5.xlarge", Interval(1.0, 1.0, 1.0))
    rival = _priced_ev("ec2:g4dn.xlarge", Interval(30.0, 20.0, 60.0))
    assert rival.runtime.low < leader.runtime.value  # the plain low end would go on probing
    assert leader_stands("time", options, [leader], [rival]) == (leader, True)
    assert leader_stands("cost", options, [leader], [rival])[1] is True  # 68 s > 60 s billed
    close = _priced_ev("ec2:g6.xlarge", Interval(30.0, 0.5, 60.0))  # could still be faster
    assert leader_stands("time", options, [leader], [rival, close])[1] is False
