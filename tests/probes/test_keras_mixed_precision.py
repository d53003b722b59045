"""Keras under a plan's mixed precision (issue #35): the ``mixed_bfloat16`` / ``mixed_float16``
policies on a built-in Keras workload (layers compute in the half type over float32 weights,
fp16 with Keras's loss scaling), the trace under the policy, and the memory model's Keras
rule against the bytes a real forward pass produces."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from advisor.prediction.memory.model import step_memory
from advisor.prediction.memory.plan import factor_memory
from advisor.prediction.step.plan import TrainingPlan

pytestmark = pytest.mark.slow  # imports TensorFlow (about 5 s) and builds Keras models

BATCH = 16


def _fcn(precision: str | None) -> Any:
    from advisor.probes.keras_precision import build_under
    from advisor.search_spaces.workloads import get

    return build_under(precision, get("fcn").builder("keras"), batch_size=BATCH,
                       n_train=2 * BATCH, n_val=BATCH, seed=0)  # fmt: skip


@pytest.mark.parametrize(("precision", "half"), [("bf16", "bfloat16"), ("fp16", "float16")])
def test_the_policy_runs_the_layers_in_half_over_float32_weights(precision: str, half: str) -> None:
    import keras

    setup = _fcn(precision)
    weighted = [layer for layer in setup.model.layers if layer.weights]
    assert weighted and {layer.compute_dtype for layer in weighted} == {half}
    assert {str(w.dtype) for w in setup.model.weights} == {"float32"}  # master weights
    scaled = isinstance(setup.model.optimizer, keras.mixed_precision.LossScaleOptimizer)
    assert scaled == (precision == "fp16")  # loss scaling for fp16 only
    assert keras.config.dtype_policy().name == "float32"  # the global policy put back
    x, y = setup.train
    losses = [float(setup.model.train_on_batch(x[:BATCH], y[:BATCH])[0]) for _ in range(3)]
    assert all(np.isfinite(losses)), losses


def _output_bytes(setup: Any) -> int:
    """Bytes of every layer's output in one real forward pass (the tensors TensorFlow keeps
    for backward are these outputs and the layers' inputs, which are earlier outputs)."""
    import keras

    model = setup.model
    layers = [layer for layer in model.layers if not isinstance(layer, keras.layers.InputLayer)]
    probe = keras.Model(model.inputs, [layer.output for layer in layers])
    x, _ = setup.train
    outs = probe(x[:BATCH], training=True)
    return int(sum(np.asarray(o).size * o.dtype.size for o in outs))


def test_the_memory_model_halves_keras_activations_as_the_policy_does() -> None:
    from advisor.probes.operators.keras_trace import trace_keras_workload

    fp32 = trace_keras_workload("fcn", BATCH)
    bf16 = trace_keras_workload("fcn", BATCH, precision="bf16")
    # the trace under the policy: half-precision activations, float32 weights and gradients
    assert bf16.memory_bytes["activations"] == fp32.memory_bytes["activations"] // 2
    for name in ("parameters", "gradients", "optimizer_state"):
        assert bf16.memory_bytes[name] == fp32.memory_bytes[name], name
    # the model (float32 trace under the plan) predicts the policy's trace ...
    terms = {t.name: t for t in factor_memory(step_memory(fp32, device="cpu"),
                                            TrainingPlan("bf16"), framework="keras").terms}  # fmt: skip
    assert terms["activations"].value == bf16.memory_bytes["activations"]
    assert not terms["activations"].prior
    # ... and the bytes a real forward pass produces move the same way
    measured = _output_bytes(_fcn("bf16")) / _output_bytes(_fcn(None))
    predicted = terms["activations"].value / fp32.memory_bytes["activations"]
    assert measured == pytest.approx(predicted, abs=0.01)
