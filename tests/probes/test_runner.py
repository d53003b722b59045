"""The subprocess probe runner: a real probe end to end, and failures that never raise."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from advisor.probes.result import ProbeRequest
from advisor.probes.runner import FRAMEWORK_ENTRY, run_probe

from advisor.errors import AdvisorError

HERE = Path(__file__).parent


@pytest.fixture(autouse=True)
def _user_models_importable(monkeypatch: pytest.MonkeyPatch) -> None:
    path = os.pathsep.join(p for p in (str(HERE), os.environ.get("PYTHONPATH", "")) if p)
    monkeypatch.setenv("PYTHONPATH", path)


@pytest.mark.slow
def test_real_fcn_probe_in_a_child_process() -> None:
    events: list[tuple[str, int, int]] = []
    result = run_probe(
        ProbeRequest("fcn", batch_size=16, iterations=4, threads=1, timeout_s=120),
        on_progress=lambda *e: events.append(e),
    )
    assert result.ok, result.error
    assert result.framework == "torch" and len(result.iteration_s) == 4
    # init runs from the parent's spawn: it includes interpreter start and `import torch`
    assert result.init_s > 0.3
    assert result.flops_per_iteration and result.flops_per_iteration > 0
    assert ("iterations", 4, 4) in events


def test_user_model_probe_ok() -> None:
    result = run_probe(
        ProbeRequest("user_models:build", batch_size=32, iterations=5, timeout_s=120)
    )
    assert result.ok, result.error
    assert result.n_train == 512 and result.n_val == 128
    assert result.validation_samples_measured == 128 and result.validation_scale == 1.0


def test_nan_loss_is_a_failed_probe_not_an_exception() -> None:
    result = run_probe(ProbeRequest("user_models:build_nan", 32, iterations=5, timeout_s=120))
    assert result.status == "nan"
    assert "nan" in (result.error or "").lower()


def test_crash_is_a_failed_probe_with_its_reason() -> None:
    result = run_probe(ProbeRequest("user_models:build_crash", 32, iterations=5, timeout_s=120))
    assert result.status == "error"
    assert "exited with code 3" in (result.error or "")


def test_timeout_kills_the_probe() -> None:
    result = run_probe(ProbeRequest("user_models:build_slow", 32, iterations=5, timeout_s=0.5))
    assert result.status == "timeout"
    assert "0.5 s" in (result.error or "")
    assert result.wall_s < 30


def test_unknown_user_module_is_an_error_result() -> None:
    result = run_probe(ProbeRequest("no_such_module:build", 32, iterations=5, timeout_s=120))
    assert result.status == "error" and "no_such_module" in (result.error or "")


def test_unknown_framework_is_a_user_error() -> None:
    assert set(FRAMEWORK_ENTRY) == {"torch", "keras"}
    with pytest.raises(AdvisorError, match="framework"):
        run_probe(ProbeRequest("fcn", 32, framework="jax"))
