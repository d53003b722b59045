"""The training entry point: argument sources, metric reports, and a tiny real run."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from advisor.providers.tuning import metric_regex

from advisor.train.entry import Reporter, parse_args
from advisor.train.expect import CUDA_LABEL, RSS_LABEL, Expected, end_line, start_line


def test_cli_values_win_over_sagemaker_hyperparameters(tmp_path: Path) -> None:
    hp = tmp_path / "hyperparameters.json"
    hp.write_text(json.dumps({"model": "fcn", "batch_size": "256", "epochs": "3", "lr": "0.1",
                              "optimizer": "sgd", "_tuning_objective_metric": "val_accuracy",
                              "sagemaker_region": "us-east-1"}))  # fmt: skip
    args, hps = parse_args(["train", "--hyperparameters-file", str(hp), "--batch-size", "512",
                            "--lr=0.05", "--weight-decay", "1e-4"])  # fmt: skip
    assert (args.model, args.batch_size, args.epochs) == ("fcn", 512, 3)
    assert hps == {"lr": 0.05, "optimizer": "sgd", "weight_decay": 1e-4}


def test_reporter_writes_log_lines_and_the_hypertune_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    metrics_file = tmp_path / "hypertune" / "output.metrics"
    monkeypatch.setenv("CLOUD_ML_HP_METRIC_FILE", str(metrics_file))
    monkeypatch.setenv("CLOUD_ML_TRIAL_ID", "7")
    lines: list[str] = []
    report = Reporter("val_accuracy", out=lines.append)
    report(0, {"val_accuracy": 0.5, "val_loss": 0.7, "train_loss": float("nan")})
    report(1, {"val_accuracy": 0.75, "val_loss": 0.6})
    assert not any("train_loss" in line for line in lines)  # NaN is not reported
    values = [
        float(m.group(1)) for line in lines if (m := re.search(metric_regex("val_accuracy"), line))
    ]
    assert values == [0.5, 0.75]
    if report._hypertune is None:  # our writer must match cloudml-hypertune's format
        records = [json.loads(line) for line in metrics_file.read_text().splitlines()]
        assert [r["val_accuracy"] for r in records] == ["0.5", "0.75"]
        assert records[-1]["global_step"] == "2" and records[-1]["trial"] == "7"
        assert set(records[-1]) == {"timestamp", "trial", "val_accuracy", "global_step"}


@pytest.mark.slow
def test_a_tiny_real_run_prints_what_sagemaker_reads(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "advisor.train", "train", "--model", "fcn", "--batch-size", "32",
         "--epochs", "2", "--n-train", "128", "--n-val", "32", "--threads", "1", "--lr=0.05",
         "--momentum", "0.9", "--hyperparameters-file", str(tmp_path / "none.json")],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    found = re.findall(metric_regex("val_accuracy"), proc.stdout)
    assert len(found) == 2 and all(0.0 <= float(v) <= 1.0 for v in found)
    runtime = re.findall(metric_regex("runtime_s"), proc.stdout)
    assert len(runtime) == 1 and float(runtime[0]) > 0
    # The measured step time (median of each epoch's steps 2..4: 128 samples / 32), for the
    # calibration ledger: positive, and no more than the epoch it is part of.
    steps = [float(v) for v in re.findall(metric_regex("step_s"), proc.stdout)]
    epochs = [float(v) for v in re.findall(metric_regex("epoch_s"), proc.stdout)]
    assert len(steps) == 2 and all(0 < s < e for s, e in zip(steps, epochs, strict=True))
    assert '"lr": 0.05' in proc.stdout and '"momentum": 0.9' in proc.stdout


def test_the_reports_predictions_are_options_not_hyperparameters(tmp_path: Path) -> None:
    """Issue #45: --expect-* (or SageMaker's static hyperparameters of the same names) are the
    entry point's own: never passed to the workload's builder."""
    hp = tmp_path / "hyperparameters.json"
    hp.write_text(json.dumps({"model": "fcn", "expect_peak_gib": "110.7", "expect_step_s": "1.21",
                              "plan": "precision=bf16,accumulation=2", "lr": "0.1"}))  # fmt: skip
    args, hps = parse_args(["--hyperparameters-file", str(hp), "--expect-peak-high-gib", "125.2"])
    assert hps == {"lr": 0.1}
    expected = Expected.from_args(args)
    assert (expected.peak_gib, expected.peak_high_gib, expected.step_s) == (110.7, 125.2, 1.21)
    assert start_line("bf16, micro-batch 16 x 2 accumulation steps", expected) == (
        "advisor-train: plan bf16, micro-batch 16 x 2 accumulation steps; the report predicted "
        "peak memory 110.7 GiB (up to 125.2) per device, steady step 1.21 s"
    )
    assert start_line("fp32", Expected()).endswith("no prediction given (--expect-*)")


def test_the_closing_line_puts_the_measured_beside_the_predicted() -> None:
    expected = Expected(peak_gib=10.0, peak_high_gib=12.0, step_s=0.5)
    line, metrics = end_line(expected, (11.0, CUDA_LABEL), 0.55)
    assert line == (
        "advisor-train: measured peak memory 11 GiB (torch.cuda.max_memory_allocated) vs "
        "predicted 10 GiB (up to 12) per device, 1.1x the prediction; steady step 0.55 s (median "
        "of steps 2..n) vs predicted 0.5 s, 1.1x the prediction"
    )
    assert metrics == {"peak_memory_gib": 11.0, "steady_step_s": 0.55}
    line, _ = end_line(expected, (0.4, RSS_LABEL), None)
    assert "x the prediction; steady" not in line and "process peak RSS" in line  # no ratio
    assert "steady step not measured" in line
    lines: list[str] = []
    Reporter("val_accuracy", out=lines.append).final(metrics)
    assert lines == ["advisor-metric: peak_memory_gib=11;", "advisor-metric: steady_step_s=0.55;"]
