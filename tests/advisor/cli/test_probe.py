"""`advisor probe` and `advisor estimate` through the CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from repo_paths import HELPERS

from advisor.cli.main import cli


def _env() -> dict[str, str]:
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(HELPERS), os.environ.get("PYTHONPATH", "")]),
    }


def _advisor(
    *args: str, timeout: float = 60, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``advisor ARGS`` in a subprocess (exit codes and one-line errors come from main())."""
    cmd = [sys.executable, "-m", "advisor.cli.main", *args]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)


@pytest.mark.slow
def test_probe_json_prints_exactly_one_json_line(tmp_path: Path) -> None:
    out = tmp_path / "probe.json"
    args = ["--model", "user_models:build", "--batch-size", "32", "--iterations", "5", "--json"]
    proc = _advisor("probe", *args, "--out", str(out), env=_env(), timeout=180)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert len(lines) == 1
    data = json.loads(lines[0])
    assert data["status"] == "ok" and len(data["iteration_s"]) == 5
    assert json.loads(out.read_text())["batch_size"] == 32

    # estimate from the saved probe, as JSON, with a price and the user's epochs in the sweep
    result = CliRunner().invoke(
        cli, ["estimate", "--probe", str(out), "--epochs", "7", "--price", "3.6", "--json"]
    )
    assert result.exit_code == 0, result.output
    est = json.loads(result.stdout)
    assert sorted(est["sweep"], key=int) == ["5", "7", "10", "20"]
    main = est["estimate"]
    assert main["epochs"] == 7 and main["iterations_per_epoch"] == 16
    assert main["cost_usd"]["value"] == pytest.approx(main["runtime_s"]["value"] * 3.6 / 3600)
    assert main["runtime_s"]["low"] <= main["runtime_s"]["value"] <= main["runtime_s"]["high"]

    table = CliRunner().invoke(cli, ["estimate", "--probe", str(out), "--no-validation"])
    assert table.exit_code == 0 and "without validation" in table.output


def test_bad_model_name_exits_2_with_one_line() -> None:
    proc = _advisor("probe", "--model", "fcnn", "--batch-size", "8")
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0
    assert "Unknown model 'fcnn'" in proc.stderr and "fcn" in proc.stderr


def test_estimate_needs_probe_or_model(tmp_path: Path) -> None:
    proc = _advisor("estimate", "--epochs", "3")
    assert proc.returncode == 2 and "--probe" in proc.stderr
    bad = tmp_path / "bad.json"
    bad.write_text("not json")
    proc = _advisor("estimate", "--probe", str(bad))
    assert proc.returncode == 2 and "is not JSON" in proc.stderr  # issue #36: one reader


@pytest.mark.slow
def test_probe_prints_its_warnings_and_keeps_them_in_json(tmp_path: Path) -> None:
    out = tmp_path / "probe.json"
    args = ["--model", "user_models:build_pooling", "--batch-size", "16", "--iterations", "3"]
    proc = _advisor("probe", *args, "--out", str(out), env=_env(), timeout=180)
    assert proc.returncode == 0, proc.stderr
    assert "warning: max pooling runs on channels-first (NCHW) CPU tensors" in proc.stdout
    saved = json.loads(out.read_text())
    assert len(saved["warnings"]) == 1 and "channels_last" in saved["warnings"][0]


@pytest.mark.slow
def test_failed_probe_prints_its_status_and_one_line_reason() -> None:
    args = ["--model", "user_models:build_sigkill", "--batch-size", "8"]
    proc = _advisor("probe", *args, env=_env(), timeout=180)
    assert proc.returncode == 1, proc.stderr
    assert "probe failed (killed): killed by signal 9 (SIGKILL)" in proc.stdout


def _children(pid: int) -> list[int]:
    tasks = Path(f"/proc/{pid}/task")
    return [int(c) for task in tasks.iterdir() for c in (task / "children").read_text().split()]


def _probe_children(pid: int) -> list[int]:
    """The children of ``pid`` that are probe processes (``advisor.probes.child``)."""
    found = []
    for c in _children(pid):
        try:
            if b"advisor.probes.child" in Path(f"/proc/{c}/cmdline").read_bytes():
                found.append(c)
        except OSError:
            continue
    return found


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="reads /proc")
def test_ctrl_c_stops_the_probe_child_and_exits_130() -> None:
    import signal
    import time

    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "advisor.cli.main",
            "probe",
            "--model",
            "user_models:build_slow",
            "--batch-size",
            "8",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(),
        start_new_session=True,  # the SIGINT goes to the parent alone, not the child too
    )
    try:
        deadline = time.monotonic() + 120  # after the check of its batch (issue #50)
        while not _probe_children(proc.pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        (child,) = _probe_children(proc.pid)
        others = _children(proc.pid)  # the isolated worker that traced it (issue #50)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    # exit 130, or Python ends the process by the signal itself (-2; a shell shows 130 too)
    assert proc.returncode in (130, -signal.SIGINT) and "Aborted." in err
    for pid in {child, *others}:  # killed and reaped, not left running
        assert not Path(f"/proc/{pid}").exists()
