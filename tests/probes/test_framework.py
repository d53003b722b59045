"""The framework-runner base: failures classified by exception type, for PyTorch (here) and
Keras (``test_keras_probe.py``), through ``probe_in_process`` and the classification hooks."""

from __future__ import annotations

import sys
import time
from dataclasses import replace
from typing import Any

import pytest
from advisor.probes.framework import (
    FrameworkRunner,
    LossDiverged,
    Prepared,
    TimeBox,
    Timed,
    classify,
)
from advisor.probes.gradient_noise import NoiseScale, estimate_noise_scale
from advisor.probes.result import ProbeRequest
from repo_paths import HELPERS

from advisor.prediction.run.iteration_model import init_for_size


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
        monkeypatch.syspath_prepend(str(HELPERS))

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


class _Recording(FrameworkRunner):
    """A framework without a framework: records the order in which the base calls its hooks."""

    name = "fake"

    def __init__(self) -> None:
        self.calls: list[str] = []

    def configure(self, request: ProbeRequest) -> int:
        return 1

    def prepare(self, request: ProbeRequest) -> Prepared:
        return Prepared(state=None, n_train=1000, n_val=100)

    def run_iterations(self, prepared: Prepared, request: ProbeRequest, box: TimeBox) -> Timed:
        self.calls.append("iterations")
        box.start()
        ends, cpu = [], []
        for _ in range(request.iterations):
            ends.append(time.perf_counter())
            cpu.append(time.process_time())
            if box.after_step():
                break
        return Timed(tuple([0.01] * len(ends)), ends, cpu, time.time(), time.process_time())

    def validation_pass(self, prepared: Prepared, request: ProbeRequest) -> tuple[float, int]:
        self.calls.append("validation")
        return 0.01, 100

    def flops(self, prepared: Prepared, request: ProbeRequest) -> tuple[float | None, str]:
        self.calls.append("flops")
        return None, "not counted"

    def model_size(self, prepared: Prepared) -> tuple[int, int]:
        return 1, 4

    def fingerprint(self, threads: int, device: str) -> dict[str, Any]:
        return {"framework": self.name}

    def gradient_noise(self, prepared: Prepared, request: ProbeRequest) -> NoiseScale | None:
        self.calls.append(f"noise max_seconds={request.max_seconds}")
        return estimate_noise_scale([3.0, 3.1, 2.9], [2.5, 2.4, 2.6], 16, 32)


def test_gradient_noise_is_measured_once_by_the_base_after_the_timed_phases() -> None:
    """Issue #19: one hook call, after the iterations and validation passes (so it does not
    change their timing), time-boxed like the iterations, recorded in the result."""
    runner = _Recording()
    request = ProbeRequest("fcn", 32, iterations=4, max_seconds=2.5)
    result = runner.probe_in_process(request)
    assert result.ok, result.error
    assert runner.calls == [
        "iterations",
        "validation",
        "validation",
        "noise max_seconds=2.5",
        "flops",
    ]
    assert result.gradient_noise is not None
    assert NoiseScale.from_dict(result.gradient_noise).big_batch == 32

    quiet = _Recording()
    off = quiet.probe_in_process(ProbeRequest("fcn", 32, iterations=4, gradient_noise=False))
    assert off.gradient_noise is None and not any(c.startswith("noise") for c in quiet.calls)


def test_a_framework_without_the_hook_measures_no_noise() -> None:
    class Plain(_Recording):
        gradient_noise = FrameworkRunner.gradient_noise  # type: ignore[assignment]

    assert Plain().probe_in_process(ProbeRequest("fcn", 32, iterations=4)).gradient_noise is None


def _time_box_stops_at(step_s: list[float], monkeypatch: pytest.MonkeyPatch) -> int:
    """How many steps a time-boxed probe (a long box) takes when its steps last ``step_s``."""
    from advisor.probes import framework

    now = [0.0]
    monkeypatch.setattr(framework.time, "perf_counter", lambda: now[0])
    request = ProbeRequest("fcn", batch_size=16, iterations=20, max_seconds=1e9)
    box = framework.TimeBox(request, 20, None)
    box.start()
    for done, seconds in enumerate(step_s, start=1):
        now[0] += seconds
        if box.after_step():
            return done
    return len(step_s)


def test_a_steady_probe_stops_early_but_never_below_the_minimum(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    steady = [3.0, 1.0, 1.01, 1.0, 1.02, 1.0, 1.0, 1.0]
    assert _time_box_stops_at(steady, monkeypatch) == 5  # steady from step 4; floor 5
    noisy = [3.0, 1.0, 1.5, 1.0, 1.4, 1.0, 1.3, 1.0]
    assert _time_box_stops_at(noisy, monkeypatch) == len(noisy)  # keeps measuring


class _Waiting(_Recording):
    """Builds its workload by waiting (``sleep``: off the CPU, as a process that waits for a
    busy core) or by computing (``spin``: the CPU clock advances)."""

    def __init__(self, wait_s: float = 0.0, spin_s: float = 0.0) -> None:
        super().__init__()
        self.wait_s, self.spin_s = wait_s, spin_s

    def prepare(self, request: ProbeRequest) -> Prepared:
        started = time.perf_counter()
        time.sleep(self.wait_s)
        end = time.process_time() + self.spin_s
        while time.process_time() < end:
            pass
        # all of it is the data's generation, timed on the wall clock as the workloads do
        return replace(super().prepare(request), data_s=time.perf_counter() - started,
                       data_samples=1100)  # fmt: skip


def test_the_initialisation_leaves_out_the_time_spent_off_the_cpu() -> None:
    """Issue #36: a probe's initialisation, carried into every GPU row, was its wall time and
    doubled when other processes kept the cores busy; it is now scaled by the share of that
    time the process ran (its CPU clock over the wall clock)."""

    def request() -> ProbeRequest:
        now = (time.time(), time.process_time())
        return ProbeRequest("fcn", 32, iterations=4, process_start=now[0], process_cpu_start=now[1])

    waited = _Waiting(wait_s=0.5).probe_in_process(request())
    clocks = waited.fingerprint["init_clocks"]
    assert clocks["wall_s"] >= 0.5 and clocks["running"] < 0.5
    assert waited.init_s < 0.25 and "CPU time over its wall time" in waited.fingerprint["init_note"]
    # its data preparation, a part of it, is scaled alike: rescaled to a tenth of the samples
    # the initialisation shrinks but stays positive (it once fell to 0 s on a busy machine)
    assert waited.data_s is not None and waited.data_s <= waited.init_s
    assert 0 < init_for_size(waited, 100, 10) < waited.init_s
    worked = _Waiting(spin_s=0.3).probe_in_process(request())
    assert worked.init_s >= 0.3  # the CPU seconds it spent building are initialisation
    # without the CPU clock's start (a probe run in a long-lived process) the wall time stays
    plain = _Waiting(wait_s=0.5).probe_in_process(
        ProbeRequest("fcn", 32, iterations=4, process_start=time.time())
    )
    assert plain.init_s >= 0.5 and "init_clocks" not in plain.fingerprint


class _Loading(_Recording):
    def loader_batch_s(self, prepared: Prepared, request: ProbeRequest) -> float | None:
        self.calls.append("loader")
        return 0.002


def test_the_loader_is_read_after_the_timed_phases_while_the_probe_has_time() -> None:
    """The DataLoader's reading comes after the timed steps and validation passes (so it does
    not change them) and is left to the advisor's process when the probe has used half its
    time-out (an untimed extra must not cost it the steps it timed)."""
    from advisor.probes.framework import LOADER_TIME_SHARE
    from advisor.probes.result import LOADER_KEY

    runner = _Loading()
    result = runner.probe_in_process(ProbeRequest("fcn", 32, iterations=4, gradient_noise=False))
    assert runner.calls[:4] == ["iterations", "validation", "validation", "loader"]
    assert result.fingerprint[LOADER_KEY] == 0.002
    late = _Loading()
    spent = ProbeRequest(
        "fcn", 32, iterations=4, gradient_noise=False, timeout_s=100.0,
        process_start=time.time() - 100.0 * LOADER_TIME_SHARE,
    )  # fmt: skip
    unread = late.probe_in_process(spent)
    assert unread.ok and "loader" not in late.calls and LOADER_KEY not in unread.fingerprint
