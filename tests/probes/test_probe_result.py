"""ProbeResult as a serialised record: failures round-trip with status and reason, and corrupt
probe JSON is refused on load with a one-line reason (Python API and CLI)."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from advisor.probes.result import PROBE_STATUSES, ProbeRequest, ProbeResult


def _ok() -> dict[str, Any]:
    return ProbeResult(
        workload="fcn",
        framework="torch",
        batch_size=32,
        device="cpu",
        threads=2,
        init_s=3.0,
        iteration_s=(0.5, 0.1, 0.1, 0.11),
        validation_s=(0.4, 0.3),
        validation_samples_measured=64,
        n_train=1000,
        n_val=100,
        wall_s=5.0,
    ).to_dict()


def test_every_failure_status_round_trips_with_its_one_line_reason() -> None:
    request = ProbeRequest("fcn", 32)
    assert set(PROBE_STATUSES) == {"ok", "oom", "nan", "timeout", "killed", "error"}
    for status in PROBE_STATUSES[1:]:
        failed = ProbeResult.failure(request, status, "line one\n  line two", 1.5)  # type: ignore[arg-type]
        again = ProbeResult.from_json(failed.to_json())
        assert again == failed and again.status == status
        assert again.reason == "line one line two" and again.error == again.reason
    assert ProbeResult.from_dict(_ok()).reason == ""


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"iteration_s": [0.5, -0.1, 0.1]}, "iteration_s[1] must be >= 0, but got -0.1"),
        ({"iteration_s": [0.5, math.nan, 0.1]}, "iteration_s[1] must be a finite number"),
        ({"validation_s": ["0.4", 0.3]}, "validation_s[0] must be a finite number, but got '0.4'"),
        ({"init_s": -3.0}, "init_s must be >= 0"),
        ({"wall_s": math.inf}, "wall_s must be a finite number"),
        ({"init_s": True}, "init_s must be a finite number"),
        ({"iteration_s": "0.5"}, "iteration_s must be a list of seconds"),
        ({"status": "exploded"}, "probe status must be one of"),
        ({"batch_size": 0}, "batch_size must be an integer from 1 to 1,048,576, but got 0"),
        # issue #36: bounds (the CLI's sample bound, a probe phase under MAX_PROBE_SECONDS)
        ({"n_val": -1}, "n_val must be an integer from 0 to 1,000,000,000, but got -1"),
        ({"n_train": 1e30}, "n_train must be an integer from 0 to 1,000,000,000"),
        ({"iteration_s": [1e308, 1.0]}, "iteration_s[0] must be <= 1e+08"),
        ({"init_s": 2e8}, "init_s must be <= 1e+08"),
        ({"extra": 1}, "unknown probe field(s): extra"),
        ({"warnings": [3]}, "warnings must be a list of strings"),
    ],
)
def test_corrupt_probe_is_refused_with_one_line(change: dict[str, Any], message: str) -> None:
    data = {**_ok(), **change}
    with pytest.raises(ValueError) as err:
        ProbeResult.from_dict(data)
    assert message in str(err.value) and "\n" not in str(err.value)


def _noise(**change: Any) -> dict[str, Any]:
    from advisor.probes.gradient_noise import estimate_noise_scale

    return {**estimate_noise_scale([3.0, 3.1, 2.9], [2.5, 2.4, 2.6], 16, 32).to_dict(), **change}


def test_gradient_noise_round_trips_finite_and_unresolved() -> None:
    """Issue #19: the noise scale survives to_json/from_json (JSON null stands for inf)."""
    for noise in (_noise(), _noise(value=None, high=None)):
        probe = ProbeResult.from_dict({**_ok(), "gradient_noise": noise})
        again = ProbeResult.from_json(probe.to_json())
        assert again == probe and again.gradient_noise == noise
    assert ProbeResult.from_dict({**_ok(), "gradient_noise": None}).gradient_noise is None


@pytest.mark.parametrize(
    ("noise", "message"),
    [
        ("big", "gradient_noise: a noise scale must be an object"),
        (_noise(extra=1), "gradient_noise: unknown noise scale field(s): extra"),
        ({"value": 3.0}, "gradient_noise: noise scale field(s) missing: low"),
        (_noise(low=1e9), "gradient_noise: low <= value <= high must hold"),
        (_noise(g2="1"), "gradient_noise: noise scale field g2 must be a number"),
        (_noise(value=-1.0, low=-2.0), "noise scale field value must be >= 0"),
        (_noise(small_batch=32), "needs small_batch < big_batch"),
        (_noise(iterations=0), "field iterations must be an integer > 0"),
        (_noise(confidence=1.5), "confidence must be in (0, 1)"),
    ],
)
def test_corrupt_gradient_noise_is_refused_with_one_line(noise: Any, message: str) -> None:
    with pytest.raises(ValueError) as err:
        ProbeResult.from_dict({**_ok(), "gradient_noise": noise})
    assert message in str(err.value) and "\n" not in str(err.value)


def test_missing_fields_and_non_objects_are_refused() -> None:
    data = _ok()
    del data["workload"]
    with pytest.raises(ValueError, match="missing: workload"):
        ProbeResult.from_dict(data)
    with pytest.raises(ValueError, match="JSON object"):
        ProbeResult.from_dict([1, 2])  # type: ignore[arg-type]


@pytest.mark.parametrize("command", ["estimate", "predict"])
def test_cli_refuses_corrupt_probe_files_with_one_line(tmp_path: Path, command: str) -> None:
    bad = tmp_path / "probe.json"
    bad.write_text(json.dumps({**_ok(), "iteration_s": [0.5, -1.0, 0.1]}) + "\n")
    args = {
        "estimate": ["estimate", "--probe", str(bad)],
        "predict": ["predict", "-m", "fcn", "-b", "32", "-i", "g5.xlarge", "--probe", str(bad)],
    }[command]
    proc = subprocess.run(
        [sys.executable, "-m", "advisor.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2, proc.stderr
    assert "iteration_s[1] must be >= 0" in proc.stderr
    assert proc.stderr.strip().count("\n") == 0 and not proc.stdout
