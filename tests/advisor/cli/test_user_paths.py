"""Issue #28: what a user meets on the ordinary paths of `advisor suggest`, driven through the
CLI: exit statuses (0 finished, 2 bad input, 130 Ctrl-C and 143 SIGTERM with the partial
report), outputs written after the report and atomically, a study name another question
used, bounds on sizes, hyperparameters a workload does not take, and the SkyPilot-style
filters. Each test failed on the code before the issue."""

from __future__ import annotations

import errno
import json
import os
import signal
import sqlite3
import time
from pathlib import Path

import pytest

from .conftest import Replay, one_line_error, run, start, table


def _trials(db: Path) -> int:
    if not db.exists():
        return 0
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5) as con:
            return int(con.execute("SELECT COUNT(*) FROM trials").fetchone()[0])
    except sqlite3.OperationalError:
        return 0


def _signal_after_first_trial(tmp_path: Path, sig: int) -> tuple[int, str, str]:
    """A real `advisor suggest --json` (1 s per evaluation), sent ``sig`` while its second
    trial is evaluated."""
    path = tmp_path / "slow.json"
    table(delay_s=1.0).save(path)
    space = tmp_path / "space.yaml"
    space.write_text("workload: fcn\nbatch_sizes: [256, 512]\n")
    db = tmp_path / "s.db"
    proc = start(
        [
            "suggest", "--model", "fcn", "--objective", "pareto", "--probe-budget", "100",
            "--space", str(space), "--storage", f"sqlite:///{db}",
            "--backend", f"replay:{path}", "--json",
        ]
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while _trials(db) < 2:  # the first trial written, the second under way
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "no trial was written"
            time.sleep(0.05)
        time.sleep(0.3)
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    return proc.returncode, out, err


@pytest.mark.slow
@pytest.mark.parametrize(
    ("sig", "status", "reason"),
    [(signal.SIGINT, 130, "interrupted"), (signal.SIGTERM, 143, "terminated")],
)
def test_a_stopped_search_prints_its_partial_report_and_exits_128_plus_the_signal(
    tmp_path: Path, sig: int, status: int, reason: str
) -> None:
    code, out, err = _signal_after_first_trial(tmp_path, sig)
    assert "Traceback" not in err, err
    assert code == status, (code, err)  # before: 0 after Ctrl-C, and SIGTERM killed it
    report = json.loads(out)
    assert report["stop_reason"].startswith(reason)
    assert report["interrupted"] == ("SIGINT" if sig == signal.SIGINT else "SIGTERM")
    assert report["trials"]["complete"] >= 1 and report["recommended"] is not None


def test_the_report_is_printed_before_the_plot_and_a_failed_write_is_one_line(
    replay: Replay, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import advisor.report.plot as plot_module

    def disk_full(report: dict, path: str) -> None:
        raise OSError(errno.ENOSPC, "No space left on device", path)

    monkeypatch.setattr(plot_module, "plot", disk_full)
    png = tmp_path / "cost.png"
    result = run(*replay.args("--budget", "5000", "--plot", str(png)))
    assert "recommended:" in result.out  # the answer is on the screen
    line = one_line_error(result)
    assert "Could not write the plot" in line and "No space left on device" in line
    assert not png.exists() and not list(tmp_path.glob(".cost.png.*"))  # no half file left


def test_out_writes_the_printed_json_report_atomically(replay: Replay, tmp_path: Path) -> None:
    out = tmp_path / "report.json"
    out.write_text("old")
    result = run(*replay.args("--budget", "5000", "--json", "--out", str(out)))
    assert result.code == 0, result
    assert json.loads(out.read_text()) == json.loads(result.out)
    assert list(tmp_path.glob(".report.json.*")) == []


def test_a_study_name_another_workload_used_is_refused(replay: Replay) -> None:
    first = run(*replay.args("--budget", "5000", "--study-name", "demo"))
    assert first.code == 0, first
    space = replay.space.with_name("cnn.yaml")
    space.write_text("workload: simple-cnn\nbatch_sizes: [256, 512]\n")
    again = run(
        "suggest", "--model", "simple-cnn", "--budget", "5000", "--study-name", "demo",
        "--space", str(space), "--backend", f"replay:{replay.table}",
    )  # fmt: skip
    line = one_line_error(again)  # before: exit 0, fcn's answer under a simple-cnn header
    assert "'demo' was made for another question" in line and "workload" in line
    assert "--study-name" in line
    other_objective = run(*replay.args("--objective", "pareto", "--study-name", "demo"))
    assert "objective differs" in one_line_error(other_objective)
    same = run(*replay.args("--budget", "5000", "--study-name", "demo"))
    assert same.code == 0 and "resumed" in same.out


@pytest.mark.parametrize("threads", ["4096", "0"])
def test_threads_are_bounded_by_this_machines_cores(replay: Replay, threads: str) -> None:
    line = one_line_error(run(*replay.args("--budget", "5000", "--threads", threads)))
    assert "--threads" in line
    if threads != "0":
        cores = len(os.sched_getaffinity(0))
        assert f"the {cores} cores of this machine" in line and f"at most {cores}" in line


@pytest.mark.parametrize(
    ("space", "expected"),
    [
        (
            "workload: fcn\nbatch_sizes: [" + ", ".join(str(8 * i) for i in range(1, 41)) + "]\n",
            "lists 40 batch sizes, more than 32",
        ),
        ("workload: fcn\nbatch_sizes: [4194304]\n", "(at most 1048576)"),
        (
            "workload: fcn\nhyperparameters:\n  lr: {type: float, low: 0.01, high: 0.3}\n"
            "  optimizer: {type: categorical, choices: [sgd, adam]}\n"
            "  epochs: {type: int, low: 1, high: 1000000000, affects_runtime: true}\n",
            "takes 1,000,000,000 values, but each value is probed on this machine: at most 64",
        ),
        (
            "workload: fcn\nhyperparameters:\n  epochs: {type: int, low: 1, high: 10000000000}\n",
            "must be within +-2,147,483,647",
        ),
    ],
)
def test_every_size_in_a_space_file_has_a_bound_named_in_its_error(
    replay: Replay, space: str, expected: str
) -> None:
    replay.space.write_text(space)
    line = one_line_error(run(*replay.args("--budget", "5000")))
    assert expected in line, line


@pytest.mark.parametrize(
    ("name", "hint"),
    [("width", "does not take width"), ("lrr", "does not take lrr (did you mean lr?)")],
)
def test_a_hyperparameter_the_workload_does_not_take_is_refused_naming_the_known_ones(
    replay: Replay, name: str, hint: str
) -> None:
    replay.space.write_text(
        f"workload: fcn\nhyperparameters:\n  {name}: {{type: int, low: 16, high: 64}}\n"
    )
    line = one_line_error(run(*replay.args("--budget", "5000")))
    assert f"line 3, key hyperparameters.{name}" in line and hint in line
    for known in ("dropout", "lr", "momentum", "optimizer", "weight_decay"):
        assert known in line


def test_optunas_step_and_log_are_accepted_in_a_space_file(replay: Replay) -> None:
    replay.space.write_text(
        "workload: fcn\nbatch_sizes: [256, 512]\nhyperparameters:\n"
        "  lr: {type: float, low: 0.01, high: 0.3, log: true}\n"
        "  dropout: {type: float, low: 0.0, high: 0.5, step: 0.1}\n"
        "  epochs: {type: int, low: 4, high: 16, step: 4}\n"
    )
    result = run(*replay.args("--budget", "5000", "--json"))
    assert result.code == 0, result
    ranges = json.loads(result.out)["tuned_ranges"]
    assert ranges["dropout"] == "0..0.5 step 0.1" and ranges["epochs"] == "4..16 step 4"
    replay.space.write_text(
        "workload: fcn\nhyperparameters:\n  dropout: {type: float, low: 0, high: 0.45, step: 0.1}\n"
    )
    assert "a high of 0.4 would be" in one_line_error(run(*replay.args("--budget", "5000")))


def _ranked(result_out: str) -> list[dict]:
    report = json.loads(result_out)
    return [
        dict(zip(("machine", "batch", "spot", "service"), p[:4], strict=True))
        for p in report["points"]
    ]


def test_skypilot_style_filters_narrow_the_candidates(replay: Replay) -> None:
    everything = run(*replay.args("--budget", "5000", "--json"))
    assert {p["service"] for p in _ranked(everything.out)} == {"ec2", "compute-engine", "local"}
    v100 = _ranked(run(*replay.args("--budget", "5000", "--json", "--gpus", "V100:1")).out)
    assert {p["machine"].removesuffix(":spot") for p in v100} == {
        "ec2:p3.2xlarge", "compute-engine:n1-standard-8+V100"
    }  # fmt: skip
    aws = _ranked(run(*replay.args("--budget", "5000", "--json", "--cloud", "aws")).out)
    assert {p["service"] for p in aws} == {"ec2"}  # this machine only with --local
    aws_here = run(*replay.args("--budget", "5000", "--json", "--cloud", "aws", "--local"))
    assert {p["service"] for p in _ranked(aws_here.out)} == {"ec2", "local"}
    spot = _ranked(run(*replay.args("--budget", "5000", "--json", "--spot", "--no-local")).out)
    assert spot and all(p["spot"] for p in spot)
    on_demand = _ranked(run(*replay.args("--budget", "5000", "--json", "--no-spot")).out)
    assert on_demand and not any(p["spot"] for p in on_demand)
    region = _ranked(run(*replay.args("--budget", "5000", "--json", "--region", "us-central1")).out)
    assert {p["service"] for p in region} == {"compute-engine", "local"}


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        (("--gpus", "H100:3"), "No machine matches --gpus H100:3"),
        (("--gpus", "A100:0"), "--gpus 'A100:0' is not an accelerator with a count"),
    ],
)
def test_a_filter_nothing_matches_says_which_filter(
    replay: Replay, flags: tuple[str, ...], expected: str
) -> None:
    line = one_line_error(run(*replay.args("--budget", "5000", *flags)))
    assert expected in line


def test_workloads_name_lists_the_hyperparameters_the_builder_takes() -> None:
    result = run("workloads", "fcn", "--json")
    assert result.code == 0, result
    params = {p["name"]: p for p in json.loads(result.out)["hyperparameters"]}
    assert set(params) == {"lr", "momentum", "weight_decay", "dropout", "optimizer", "epochs"}
    assert params["dropout"]["accepts"] == "a number >= 0 and < 1"
    assert params["lr"]["default_space"] == "0.01..0.3 log"
    shown = run("workloads", "lstm")
    assert "Hyperparameters lstm takes" in shown.out and "hidden" in shown.out


@pytest.mark.slow  # the prediction traces the model on the meta device (imports torch)
def test_predict_takes_the_same_filters(tmp_path: Path) -> None:
    from advisor.probes.result import ProbeRequest

    from ..storage.suggest_with_fake_probes import probe

    saved = tmp_path / "probe.json"
    saved.write_text(probe(ProbeRequest(workload="fcn", batch_size=512)).to_json())
    args = ("predict", "--model", "fcn", "--batch-size", "512", "--probe", str(saved), "--json")
    result = run(*args, "--gpus", "A10G:1", "--cloud", "aws")
    assert result.code == 0, result
    machines = {row["machine"] for row in json.loads(result.out)["machines"]}
    assert machines and all(m.startswith(("ec2:g5.", "sagemaker:ml.g5.")) for m in machines)
    nothing = run(*args, "--gpus", "A100:1", "--cloud", "aws")  # AWS sells A100s by 8
    assert "No machine matches --gpus A100:1 --cloud aws" in one_line_error(nothing)
    assert "No machines to predict on" in one_line_error(run(*args))
