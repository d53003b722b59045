"""The ledger: a measured run is stored in Optuna's storage and corrects the next prediction."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from click.testing import CliRunner
from perf_fixtures import FakeCatalog, gpu_machine, probe, probe_file

from advisor.cli.main import cli
from advisor.prediction.timing.correction import calibration_factor, load_records
from advisor.prediction.timing.ledger import LEDGER_STUDY
from advisor.prediction.timing.model import predict, record_run


def _predict_json(runner: CliRunner, path: Path, machine: str) -> dict:  # type: ignore[type-arg]
    # float32, as the measured run recorded below (calibration records a plain step's time)
    args = ["predict", "-m", "fcn", "-b", "512", "-i", machine, "--probe", str(path), "--json",
            "--precision", "fp32"]  # fmt: skip
    result = runner.invoke(cli, args)
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)["machines"]
    assert len(rows) == 1
    return rows[0]


def test_second_prediction_is_corrected_by_a_recorded_measurement(
    tmp_path: Path, _advisor_home: Path
) -> None:
    runner = CliRunner()
    path = probe_file(tmp_path)
    machine = "p3.2xlarge"
    first = _predict_json(runner, path, machine)
    predicted = first["prediction"]["phases"]["t2"]["value"]
    assert first["prediction"]["calibration_points"] == 0

    measured = predicted * 1.8  # the real V100 was 1.8x slower than modelled
    result = runner.invoke(
        cli,
        ["calibration", "record", "-i", machine, "--probe", str(path), "-b", "512",
         "--measured-step-s", str(measured), "--origin", "local-run"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "x1.80" in result.output

    second = _predict_json(runner, path, machine)
    pred = second["prediction"]
    assert pred["phases"]["t2"]["value"] == pytest.approx(measured, rel=1e-6)
    assert pred["calibration"] == pytest.approx(1.8)
    assert pred["calibration_points"] == 1
    assert "p3.2xlarge" in pred["calibration_evidence"]
    assert "same workload signature" in pred["calibration_evidence"]
    # A narrower interval than before: the measurement is evidence.
    width = lambda iv: iv["high"] / iv["low"]  # noqa: E731
    assert width(pred["phases"]["t2"]) < width(first["prediction"]["phases"]["t2"])

    # The record lives in Optuna's storage, as a trial of the ledger study.
    import optuna

    url = f"sqlite:///{_advisor_home / 'studies.db'}"
    trials = optuna.load_study(study_name=LEDGER_STUDY, storage=url).get_trials()
    assert len(trials) == 1
    assert trials[0].value == pytest.approx(math.log(1.8))
    key = trials[0].user_attrs["ledger"]["machine"]
    assert key.endswith(machine)

    listing = runner.invoke(cli, ["calibration", "--json"])
    assert listing.exit_code == 0, listing.output
    data = json.loads(listing.output)
    assert [r["machine"] for r in data["records"]] == [key]
    assert data["corrections"][0]["factor"] == pytest.approx(1.8)
    table = runner.invoke(cli, ["calibration"])
    assert "V100" in table.output and "1.80" in table.output


def test_closest_evidence_wins_and_other_classes_are_untouched() -> None:
    cat = FakeCatalog()
    v100 = gpu_machine("p3.2xlarge", "V100", 1, 3.06)
    small, other = probe(), probe(workload="simple-cnn", flops_per_sample=4e7)
    record_run(other, v100, cat, 512, predict(other, v100, cat).phases.t2.value * 3.0, "test")
    # fcn has no record of its own: it gets the device class's correction (from simple-cnn).
    cal = calibration_factor("V100", "fcn")
    assert cal.scope == "same device class" and cal.factor == pytest.approx(3.0)
    record_run(small, v100, cat, 512, predict(small, v100, cat, calibrate=False).phases.t2.value * 1.2, "test")  # fmt: skip
    cal = calibration_factor("V100", "fcn")
    assert cal.factor == pytest.approx(1.2) and cal.points == 1
    assert calibration_factor("K80", "fcn").points == 0
    # issue #46: a prediction reads the ledger once and hands the records on: the same factor
    assert calibration_factor("V100", "fcn", records=load_records()) == cal
    assert calibration_factor("V100", "fcn", records=[]).points == 0
    assert predict(small, v100, cat).calibration == pytest.approx(1.2)


def test_empty_ledger_says_so_and_bad_measurement_is_a_user_error(tmp_path: Path) -> None:
    runner = CliRunner()
    result = runner.invoke(cli, ["calibration"])
    assert result.exit_code == 0 and "Nothing learnt yet" in result.output
    from advisor.cli.main import main

    path = probe_file(tmp_path)
    with pytest.raises(SystemExit) as exc:
        main(["calibration", "record", "-i", "p3.2xlarge", "--probe", str(path),
              "-b", "512", "--measured-step-s", "-1"])  # fmt: skip
    assert exc.value.code == 2


def test_the_local_machine_is_not_calibrated() -> None:
    from advisor.providers.catalog import local_machine

    from advisor.errors import AdvisorError

    with pytest.raises(AdvisorError):
        record_run(probe(), local_machine(), FakeCatalog(), 512, 0.1, "test")
