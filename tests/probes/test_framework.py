"""The framework-runner base: failures classified by exception type, for PyTorch (here) and
Keras (``test_keras_probe.py``), through ``probe_in_process`` and the classification hooks."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from advisor.probes.framework import LossDiverged, classify
from advisor.probes.result import ProbeRequest

HERE = Path(__file__).parent


def test_classification_is_by_exception_type_not_by_message() -> None:
    assert classify(LossDiverged("loss became nan")) == "nan"
    assert classify(MemoryError()) == "oom"
    assert classify(TimeoutError("data download")) == "timeout"
    assert classify(ValueError("bad shape")) == "error"
    # words in a message do not make a failure: only the type (or the framework's hook) does
    assert classify(RuntimeError("out of memory")) == "error"
    assert classify(RuntimeError("loss is NaN")) == "error"
    assert classify(RuntimeError("x"), is_oom=lambda e: isinstance(e, RuntimeError)) == "oom"


class TestTorch:
    @pytest.fixture(autouse=True)
    def _user_models(self, monkeypatch: pytest.MonkeyPatch) -> None:
        pytest.importorskip("torch")
        monkeypatch.syspath_prepend(str(HERE))

    def test_out_of_memory_types(self) -> None:
        import torch
        from advisor.probes.torch_runner import RUNNER

        assert RUNNER.classify(torch.OutOfMemoryError("CUDA out of memory.")) == "oom"
        with pytest.raises(RuntimeError) as real:  # a real CPU allocation failure
            torch.empty(2**60, dtype=torch.uint8)
        assert RUNNER.classify(real.value) == "oom"
        assert RUNNER.classify(MemoryError()) == "oom"
        assert RUNNER.classify(RuntimeError("mat1 and mat2 shapes cannot be multiplied")) == "error"
        assert RUNNER.classify(LossDiverged("loss became nan")) == "nan"

    @pytest.mark.parametrize(
        ("fail", "status", "words"),
        [
            ("allocation", "oom", "DefaultCPUAllocator"),
            ("memory", "oom", "MemoryError: no memory"),
            ("value", "error", "ValueError: shapes do not match"),
        ],
    )
    def test_failures_in_the_probe_are_results(self, fail: str, status: str, words: str) -> None:
        from advisor.probes.torch_runner import probe_in_process

        request = ProbeRequest(
            "user_models:build_failing", 32, iterations=3, threads=1, hyperparameters={"fail": fail}
        )
        result = probe_in_process(request)
        assert result.status == status
        assert words in result.reason and "\n" not in result.reason
        assert result.framework == "torch" and result.fingerprint["framework"] == "torch"
        assert result.peak_host_memory_bytes and result.wall_s > 0

    def test_nan_loss_is_raised_by_the_step_and_classified(self) -> None:
        from advisor.probes.torch_runner import probe_in_process

        result = probe_in_process(ProbeRequest("user_models:build_nan", 32, iterations=3))
        assert result.status == "nan" and result.reason.startswith("LossDiverged: loss became nan")


def test_both_runners_share_one_probe_loop() -> None:
    """``probe_in_process`` exists once: each framework module exposes the base's method."""
    pytest.importorskip("torch")
    from advisor.probes import torch_runner
    from advisor.probes.framework import FrameworkRunner

    assert isinstance(torch_runner.RUNNER, FrameworkRunner)
    assert torch_runner.probe_in_process.__func__ is FrameworkRunner.probe_in_process  # type: ignore[attr-defined]
    assert "probe_in_process" not in vars(torch_runner.TorchRunner)
    assert sys.modules["advisor.probes.framework"].LossDiverged is torch_runner.LossDiverged
