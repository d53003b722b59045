"""The Keras probe: phases from Keras' own hooks, through the real subprocess runner, with the
same result type, FLOPs convention and parameter counts as the PyTorch probe."""

from __future__ import annotations

import dataclasses
import sys
import textwrap
from pathlib import Path

import pytest
from advisor.probes.result import ProbeRequest

pytestmark = pytest.mark.slow  # these import TensorFlow (about 5 s) and train for real

USER_MODEL = '''
import numpy as np
import keras

from advisor.search_spaces.workloads import KerasSetup


def _fail(kind):
    def on_batch_end(batch, logs):
        if kind == "allocation":  # a real allocation failure in TensorFlow
            import tensorflow as tf

            tf.zeros([2**40, 2**10])
        raise ValueError("a user callback failed")

    return keras.callbacks.LambdaCallback(on_train_batch_end=on_batch_end)


def build(batch_size=32, seed=0, lr=0.01, poison=False, fail=None, **_ignored):
    """A user's own Keras model: 8 features -> 2 classes, 256 training and 64 val rows."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(256, 8)).astype("float32")
    y = (x[:, 0] > 0).astype("int64")
    layers = [keras.Input((8,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dense(2)]
    if poison:  # a model whose loss is NaN from the first step
        layers.append(keras.layers.Lambda(lambda t: t * float("nan")))
    model = keras.Sequential(layers)
    model.compile(optimizer=keras.optimizers.SGD(lr),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    callbacks = (_fail(fail),) if fail else ()
    return KerasSetup(model=model, train=(x, y), val=(x[:64], y[:64]), batch_size=batch_size,
                      callbacks=callbacks)
'''


@pytest.fixture
def user_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    (tmp_path / "my_keras_model.py").write_text(textwrap.dedent(USER_MODEL))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("PYTHONPATH", f"{tmp_path}:{':'.join(sys.path)}")
    return "my_keras_model:build"


def test_builtin_probe_through_the_subprocess_runner() -> None:
    from advisor.probes.runner import run_probe

    result = run_probe(
        ProbeRequest(
            workload="simple-cnn",
            framework="keras",
            batch_size=32,
            iterations=5,
            threads=2,
            validation_batches=2,
            timeout_s=240,
        )
    )
    assert result.ok, result.error
    assert result.framework == "keras" and len(result.iteration_s) == 5
    # the first iteration traces the train step: the outlier the estimator expects
    assert result.iteration_s[0] > max(result.iteration_s[1:])
    # initialisation: measured, plus generating the full 70,000 digits (scaled from the 224 made)
    # (16 training batches of 32 for the noise measurement, issue #19, and 64 validation)
    assert result.init_s > 0 and "scaled from 576" in result.fingerprint["init_note"]
    assert (result.n_train, result.n_val) == (60_000, 10_000)  # published sizes
    assert result.validation_samples_measured == 64
    assert result.validation_scale == pytest.approx(10_000 / 64)
    assert len(result.validation_s) == 2 and result.validation_s[0] >= result.validation_s[1] > 0
    assert result.parameters == 1_199_882
    assert result.gradient_bytes == 4 * 1_199_882
    # 2 FLOPs per multiply-add, forward + both gradients except the first layer's input one
    per_sample = result.flops_per_iteration / 32
    assert per_sample == pytest.approx(71.57e6, rel=0.01)
    assert result.peak_host_memory_bytes > 100e6
    assert 0 < result.cpu_utilisation <= 1
    assert result.fingerprint["tensorflow"] and result.fingerprint["keras"].startswith("3.")
    # issue #19: the gradient noise scale, measured by the Keras hook after the timing, comes
    # back through the child process's JSON
    from advisor.probes.gradient_noise import CHUNKS, from_probe

    noise = from_probe(result)
    assert noise is not None and noise.small_batch == 32 // CHUNKS  # micro-batches, pooled
    assert noise.big_batch == 32 * noise.iterations
    assert noise.low <= noise.value <= noise.high and noise.iterations >= 3


def test_user_model_by_import_path(user_module: str) -> None:
    from advisor.probes.keras_runner import probe_in_process

    events: list[tuple[str, int, int]] = []
    result = probe_in_process(
        ProbeRequest(workload=user_module, framework="keras", batch_size=32, iterations=4),
        on_progress=lambda phase, done, total: events.append((phase, done, total)),
    )
    assert result.ok, result.error
    assert (result.n_train, result.n_val) == (256, 64)  # the user's own data sizes
    assert result.parameters == 8 * 16 + 16 + 16 * 2 + 2
    assert result.flops_per_iteration == pytest.approx(32 * 2 * (2 * 8 * 16 + 3 * 16 * 2))
    assert events[:4] == [("iterations", i, 4) for i in range(1, 5)]
    assert events[-1] == ("validation", 2, 2)


def test_nan_loss_is_a_result_not_an_exception(user_module: str) -> None:
    from advisor.probes.keras_runner import probe_in_process

    result = probe_in_process(
        ProbeRequest(
            workload=user_module,
            framework="keras",
            batch_size=32,
            iterations=3,
            hyperparameters={"poison": True},
        )
    )
    assert result.status == "nan" and "loss" in (result.error or "")


@pytest.mark.parametrize(
    ("fail", "status", "words"),
    [
        ("allocation", "oom", "ResourceExhaustedError: "),
        ("value", "error", "ValueError: a user callback failed"),
    ],
)
def test_failures_are_classified_by_exception_type(
    user_module: str, fail: str, status: str, words: str
) -> None:
    from advisor.probes.keras_runner import probe_in_process

    result = probe_in_process(
        ProbeRequest(
            workload=user_module,
            framework="keras",
            batch_size=32,
            iterations=3,
            hyperparameters={"fail": fail},
        )
    )
    assert result.status == status
    assert result.reason.startswith(words) and "\n" not in result.reason


def test_out_of_memory_types() -> None:
    import tensorflow as tf
    from advisor.probes.framework import LossDiverged
    from advisor.probes.keras_runner import RUNNER

    assert RUNNER.classify(tf.errors.ResourceExhaustedError(None, None, "OOM")) == "oom"
    assert RUNNER.classify(MemoryError()) == "oom"
    assert RUNNER.classify(LossDiverged("loss became nan")) == "nan"
    assert RUNNER.classify(tf.errors.InvalidArgumentError(None, None, "out of memory")) == "error"


def test_time_box_stops_the_keras_probe_after_the_minimum_iterations(user_module: str) -> None:
    from advisor.probes.keras_runner import probe_in_process

    events: list[tuple[str, int, int]] = []
    request = ProbeRequest(
        workload=user_module, framework="keras", batch_size=16, iterations=12, max_seconds=1e-6
    )
    result = probe_in_process(request, on_progress=lambda *e: events.append(e))
    assert result.ok, result.error
    assert len(result.iteration_s) == 5  # MIN_PROBE_ITERATIONS, then the time box applies
    assert [e for e in events if e[0] == "iterations"][-1] == ("iterations", 5, 12)
    untimed = probe_in_process(dataclasses.replace(request, max_seconds=None))
    assert untimed.ok and len(untimed.iteration_s) == 12


def test_workload_without_that_framework_is_an_error_result() -> None:
    from advisor.probes.keras_runner import probe_in_process

    result = probe_in_process(
        ProbeRequest(workload="no-such-model", framework="keras", batch_size=8, iterations=3)
    )
    assert result.status == "error" and "Unknown model" in (result.error or "")


def test_callback_phases_with_a_fake_clock() -> None:
    from advisor.probes.keras import ProbeCallback

    ticks = iter([0.0, 5.0, 5.5, 6.5, 10.0, 10.2, 20.0, 23.0, 30.0, 31.0])
    cb = ProbeCallback(clock=lambda: next(ticks))
    cb.on_train_batch_begin(0)
    cb.on_train_batch_end(0, {"loss": 1.0})  # 5.0: the first iteration, begin to end
    cb.on_train_batch_begin(1)  # 5.5
    cb.on_train_batch_end(1, {"loss": 0.9})  # 6.5: 1.5 since the previous end
    cb.on_train_batch_begin(2)  # 10.0
    cb.on_train_batch_end(2, {"loss": float("nan")})  # 10.2: 3.7
    cb.on_test_begin()
    cb.on_test_end()
    cb.on_test_begin()
    cb.on_test_end()
    assert cb.iteration_s == pytest.approx((5.0, 1.5, 3.7))
    assert cb.validation_s == pytest.approx((3.0, 1.0))
    assert cb.diverged and cb.first_batch_wall is not None
