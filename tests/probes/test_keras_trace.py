"""The Keras operator trace (issue #26): every built-in Keras workload traced from its layers,
with the same products (FLOPs, forward and backward) as the PyTorch trace of the same
network, and a user's binary classifier."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.slow  # imports TensorFlow (about 5 s) and builds Keras models

HERE = Path(__file__).parent


def _products(trace: Any, phase: str) -> float:
    return sum(
        o.flops * o.count
        for o in trace.operators
        if o.kind in ("linear", "bmm", "conv") and o.phase == phase
    )


@pytest.mark.parametrize(
    "workload", ["fcn", "simple-cnn", "vgg-1", "resnet50", "googlenet", "lstm"]
)
def test_keras_trace_matches_the_torch_trace_of_the_same_network(workload: str) -> None:
    from advisor.probes.operators import trace_workload
    from advisor.search_spaces.workloads import get

    keras = trace_workload(workload, 8, framework="keras")
    torch = trace_workload(workload, 8, framework="torch")
    assert keras.framework == "keras" and not keras.executed
    assert keras.parameters == torch.parameters == get(workload).parameters
    for phase in ("forward", "backward"):
        assert _products(keras, phase) == pytest.approx(_products(torch, phase), rel=1e-9)
    assert set(keras.launches_by_phase()) == {"forward", "backward", "optimizer"}
    assert keras.memory_bytes["optimizer_state"] > 0


def test_keras_lstm_is_traced_per_time_step() -> None:
    from advisor.probes.operators import trace_keras_workload

    trace = trace_keras_workload("lstm", 4)
    recurrent = [o for o in trace.operators if o.op == "recurrent"]
    assert [(o.dims["M"], o.dims["N"], o.dims["K"], o.count) for o in recurrent] == [
        (4, 800, 200, 2 * 35)  # batch x hidden by hidden x 4 gates, 35 steps, 2 layers
    ]
    assert any(o.op == "recurrent_data_grad" and o.count == 70 for o in trace.operators)


def test_binary_classifier_user_model(monkeypatch: pytest.MonkeyPatch) -> None:
    from advisor.probes.operators import trace_keras_workload

    monkeypatch.syspath_prepend(str(HERE))
    trace = trace_keras_workload("keras_user_models:build_binary", 32)
    ops = {(o.kind, o.op) for o in trace.operators}
    assert ("embedding", "forward") in ops and ("linear", "recurrent") in ops
    assert ("elementwise", "sigmoid") in ops and ("elementwise", "sigmoid_backward") in ops
    assert ("elementwise", "error") in ops  # binary cross-entropy: element-wise terms
    assert trace.parameters == 50 * 8 + 4 * 8 * (8 + 8 + 1) + 8 + 1
    updates = [o for o in trace.operators if o.phase == "optimizer"]
    assert sum(o.count for o in updates) == 12 * 6  # Adam: 12 kernels for each of 6 variables
