"""Issue #26, section 5: a Keras probe of a plain binary classifier (sigmoid output, 1-D
labels) succeeds, measures the gradient noise scale with the loss ``fit`` uses, and an
optional measurement that fails is recorded, never fatal."""

from __future__ import annotations

import os

import pytest
from advisor.probes.result import ProbeRequest
from repo_paths import HELPERS

pytestmark = pytest.mark.slow  # imports TensorFlow and trains for real

BINARY = "keras_user_models:build_binary"


@pytest.fixture
def on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(HELPERS))
    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join([str(HELPERS), os.environ.get("PYTHONPATH", "")])
    )


def test_binary_classifier_probe_measures_the_noise_scale(on_path: None) -> None:
    from advisor.probes.gradient_noise import CHUNKS, from_probe
    from advisor.probes.runner import run_probe

    result = run_probe(
        ProbeRequest(workload=BINARY, framework="keras", batch_size=32, iterations=5, timeout_s=240)
    )
    assert result.ok, result.error
    assert len(result.iteration_s) == 5 and (result.n_train, result.n_val) == (512, 64)
    noise = from_probe(result)  # was: "target and output must have the same rank"
    assert noise is not None and noise.small_batch == 32 // CHUNKS
    assert noise.iterations >= 3 and noise.low <= noise.value <= noise.high
    assert not [w for w in result.warnings if "not measured" in w]


def test_fit_loss_shapes_targets_as_fit_does(on_path: None) -> None:
    import numpy as np
    from advisor.probes.gradient_noise_frameworks import keras_fit_loss
    from keras_user_models import build_binary

    setup = build_binary(batch_size=16)
    x, y = setup.train
    setup.model.fit(x[:16], y[:16], batch_size=16, epochs=1, verbose=0)  # builds the loss
    pred = setup.model(x[:16], training=False)
    loss = float(keras_fit_loss(setup.model)(y[:16], pred))
    p = np.asarray(pred)[:, 0].astype("float64")
    clipped = np.clip(p, 1e-7, 1 - 1e-7)  # Keras' epsilon
    expected = -np.mean(y[:16] * np.log(clipped) + (1 - y[:16]) * np.log(1 - clipped))
    assert loss == pytest.approx(expected, rel=1e-4)


def test_a_failing_optional_measurement_is_recorded_not_fatal(
    on_path: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    from advisor.probes import keras_runner

    def broken(*_: object, **__: object) -> None:
        raise ValueError("Arguments `target` and `output` must have the same rank")

    monkeypatch.setattr(keras_runner.KerasRunner, "gradient_noise", broken)
    result = keras_runner.probe_in_process(
        ProbeRequest(workload=BINARY, framework="keras", batch_size=32, iterations=4)
    )
    assert result.ok, result.error
    assert result.gradient_noise is None
    assert any(
        w.startswith("gradient noise scale not measured: ValueError: Arguments `target`")
        for w in result.warnings
    )
    assert result.flops_per_iteration is not None  # the other measurements still ran
