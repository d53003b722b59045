"""The PyTorch probe and training loop, in process (fast) and FLOP counting."""

from __future__ import annotations

import pytest
from advisor.probes.result import ProbeRequest

torch = pytest.importorskip("torch")

from advisor.probes import torch_runner  # noqa: E402


def test_probe_in_process_measures_every_phase() -> None:
    from advisor.probes.gradient_noise import NOISE_BATCHES

    request = ProbeRequest("fcn", batch_size=16, iterations=4, threads=1, validation_batches=2)
    events: list[tuple[str, int, int]] = []
    result = torch_runner.probe_in_process(request, on_progress=lambda *e: events.append(e))
    assert result.ok, result.error
    assert len(result.iteration_s) == 4 and all(t > 0 for t in result.iteration_s)
    assert len(result.validation_s) == 2
    assert result.validation_samples_measured == 32
    assert result.validation_scale == pytest.approx(212 / 32)
    assert result.n_train == 40_512 and result.n_val == 212  # the workload's published sizes
    assert result.init_s > 0 and result.wall_s >= result.init_s - 60  # scaled data part
    assert result.parameters and result.parameters > 10_000
    assert result.gradient_bytes == 4 * result.parameters
    assert result.peak_host_memory_bytes and result.peak_host_memory_bytes > 10 * 2**20
    assert result.peak_accelerator_memory_bytes is None
    assert result.samples_per_s and result.samples_per_s > 0
    assert result.cpu_utilisation is not None and 0 < result.cpu_utilisation <= 1
    assert result.fingerprint["torch"] == torch.__version__ and result.fingerprint["threads"] == 1
    # the 16 batches the noise measurement uses (issue #19; 4 timed among them) + validation
    assert result.data_s is not None and result.data_samples == 16 * NOISE_BATCHES + 32
    assert events[-1] == ("validation", 2, 2) and ("iterations", 4, 4) in events
    assert result.warnings == ()  # fcn pools channels-last: nothing data-dependent


def test_the_probe_reads_its_loader_so_a_gpu_row_does_not_build_the_data_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The DataLoader's CPU seconds per batch come with the probe (the input term of a GPU
    row); made ready for a GPU row, the probe is traced but its data is not built again."""
    from advisor.probes.result import LOADER_KEY

    from advisor.prediction.step import ready

    request = ProbeRequest("fcn", batch_size=16, iterations=4, threads=1, gradient_noise=False)
    probe = torch_runner.probe_in_process(request)
    assert probe.ok, probe.error
    per_batch = probe.fingerprint[LOADER_KEY]
    assert 0 < per_batch < max(probe.iteration_s)  # a share of a step that also loads a batch

    def built_again(*args: object, **kwargs: object) -> None:
        raise AssertionError("the DataLoader was timed again")

    monkeypatch.setattr(ready, "_loader", built_again)
    out, notes = ready.traced(probe)
    assert out.operator_trace is not None and notes == ()
    assert out.fingerprint[LOADER_KEY] == per_batch


def test_probe_measures_the_gradient_noise_scale_after_the_timing() -> None:
    """Issue #19: the torch hook measures B_simple on micro-batches of B / CHUNKS, pooled over
    the batches it generated for the measurement (NOISE_BATCHES, more than the timed ones)."""
    from advisor.probes.gradient_noise import CHUNKS, MIN_NOISE_BATCHES, NOISE_BATCHES, from_probe

    request = ProbeRequest("fcn", batch_size=16, iterations=4, threads=1, validation_batches=2)
    probe = torch_runner.probe_in_process(request)
    noise = from_probe(probe)
    assert noise is not None and noise.small_batch == 16 // CHUNKS
    assert MIN_NOISE_BATCHES <= noise.iterations <= NOISE_BATCHES
    assert noise.big_batch == 16 * noise.iterations  # every measured sample, pooled
    assert probe.fingerprint["generated_train_samples"] == 16 * NOISE_BATCHES
    assert noise.low <= noise.value <= noise.high and noise.overhead_s > 0
    off = ProbeRequest("fcn", batch_size=16, iterations=4, threads=1, gradient_noise=False)
    timing_only = torch_runner.probe_in_process(off)
    assert timing_only.gradient_noise is None
    assert timing_only.fingerprint["generated_train_samples"] == 16 * 4  # the timed ones


def test_flops_per_iteration_scale_with_batch_size() -> None:
    torch_runner.configure(1)
    small, _, _ = torch_runner.build_setup("simple-cnn", 8, 8, 8)
    big, _, _ = torch_runner.build_setup("simple-cnn", 16, 16, 8)
    f8 = torch_runner.flops_per_iteration(small, next(iter(small.train_loader)))
    f16 = torch_runner.flops_per_iteration(big, next(iter(big.train_loader)))
    assert f8 > 0
    assert f16 / f8 == pytest.approx(2.0, rel=0.02)
    # forward is about 23.9 MFLOP per sample (module docstring); forward+backward ~ 2-3x
    assert 2.0 * 23.9e6 < f8 / 8 < 3.2 * 23.9e6


def test_user_builder_tuple_is_wrapped_and_trained() -> None:
    setup, real_train, real_val = torch_runner.build_setup("user_models:build", 32, None, None)
    assert real_train is None and real_val is None
    assert torch_runner.dataset_size(setup.train_loader) == 512
    epochs: list[int] = []
    out = torch_runner.train(setup, 3, on_epoch=lambda e, m: epochs.append(e))
    assert epochs == [0, 1, 2] and out["epochs_run"] == 3
    assert out["iterations"] == 3 * 16
    assert out["val_accuracy"][-1] > 0.8  # linearly separable: learnt in 3 epochs
    assert out["runtime_s"] >= sum(out["epoch_s"]) * 0.99


def test_bad_builder_return_value_is_a_clear_error() -> None:
    with pytest.raises(TypeError, match="TorchSetup"):
        torch_runner.as_setup(42, 8)


@pytest.mark.slow
def test_fcn_learns_above_chance_in_a_few_epochs() -> None:
    torch_runner.configure(2)
    setup, _, _ = torch_runner.build_setup(
        "fcn", 32, 1536, 512, hyperparameters={"epochs": 3, "lr": 0.03}
    )
    out = torch_runner.train(setup, 3)
    assert out["val_accuracy"][-1] > 0.75, out["val_accuracy"]  # chance is 0.5


@pytest.mark.slow
def test_simple_cnn_learns_digits() -> None:
    torch_runner.configure(2)
    setup, _, _ = torch_runner.build_setup("simple-cnn", 64, 2048, 512)
    out = torch_runner.train(setup, 2)
    assert out["val_accuracy"][-1] > 0.6, out["val_accuracy"]


def test_flops_counted_on_a_slice_equal_the_whole_batch_count(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    torch_runner.configure(1)
    setup, _, _ = torch_runner.build_setup("fcn", 128, 128, 8)
    batch = next(iter(setup.train_loader))
    sliced = torch_runner.flops_per_iteration(setup, batch)  # 32 of 128 samples, scaled x4
    monkeypatch.setattr(torch_runner, "FLOP_SLICE", 1_000)  # count all 128
    whole = torch_runner.flops_per_iteration(setup, batch)
    assert sliced == pytest.approx(whole, rel=1e-6)


def test_time_boxed_probe_stops_after_the_minimum_iterations() -> None:
    request = ProbeRequest(
        "fcn", batch_size=16, iterations=12, threads=1, validation_batches=1, max_seconds=1e-6
    )
    result = torch_runner.probe_in_process(request)
    assert result.ok, result.error
    assert len(result.iteration_s) == 5  # MIN_PROBE_ITERATIONS, then the time box applies
    assert not request.stop_early(4, 10.0) and request.stop_early(5, 1e-6)
    assert not ProbeRequest("fcn", batch_size=16).stop_early(100, 1e9)  # no time box


def test_probe_warns_when_max_pooling_runs_channels_first_on_cpu() -> None:
    def probe(**hps: bool) -> tuple[str, ...]:
        request = ProbeRequest(
            "user_models:build_pooling", batch_size=16, iterations=3, threads=1, hyperparameters=hps
        )
        result = torch_runner.probe_in_process(request)
        assert result.ok, result.error
        return result.warnings

    warnings = probe()
    assert len(warnings) == 1 and "channels_last" in warnings[0] and "NCHW" in warnings[0]
    assert probe(channels_last=True) == ()
