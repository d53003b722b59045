"""A GPU the tables never measured is predicted from its spec with a wider interval and a
note; a measured chip on another board says so."""

from __future__ import annotations

import math

from advisor.probes.operators import Operator, OperatorTrace

from advisor.prediction.kernels import (
    gpu_spec,
    operator_times,
    predict_operator,
    predict_trace,
    predict_trace_times,
)

MM = Operator("linear", "forward", "aten.addmm", {"B": 1, "M": 2048, "N": 2048, "K": 2048})


def log_width(gpu: str) -> float:
    t = predict_operator(MM, gpu)
    return math.log(t.high / t.low)


def test_spec_only_interval_is_wider_than_a_measured_gpus() -> None:
    assert log_width("H200") > log_width("T4") * 1.2
    assert log_width("L4") > log_width("P100") * 1.2


def trace() -> OperatorTrace:
    ops = (
        MM,
        Operator(
            "linear", "backward", "aten.mm", {"B": 1, "M": 2048, "N": 2048, "K": 2048}, count=2
        ),
        Operator("softmax", "forward", "aten._softmax", {"B": 4096, "H": 1024}, count=3),
        Operator("optimizer", "optimizer", "aten._foreach_add_", {"numel": 10**7}),
    )
    return OperatorTrace("toy", "torch", 8, ops, executed=False)


def test_trace_prediction_splits_phases_and_names_its_basis() -> None:
    steps = predict_trace(trace(), ["H200", "T4", "V100"])
    h200, t4, v100 = steps["H200"], steps["T4"], steps["V100"]
    assert "spec extrapolation for H200" in h200.basis
    assert any("no kernel measurements on H200" in n for n in h200.notes)
    assert "T4 measured" in t4.basis and not any("no kernel measurements" in n for n in t4.notes)
    assert "its chip measured as V100-PCIe-32GB" in v100.basis
    for step in steps.values():
        parts = sum(p.value for p in step.by_phase.values())
        assert math.isclose(parts, step.total.value, rel_tol=1e-9)
        assert set(step.by_phase) == {"forward", "backward", "optimizer"}
        assert step.top[0][1] >= step.top[-1][1] and 0 < step.top[0][2] <= 1
    assert any("reduction/embedding/copy/optimizer" in n for n in h200.notes)
    assert t4.total.value > h200.total.value  # a T4 is slower than an H200


def test_trace_prediction_with_its_operator_times_is_the_same_prediction() -> None:
    """Issue #46: the step-time model reads the step and its per-operator times from one call."""
    steps, times = predict_trace_times(trace(), ["T4", "H200"], tf32_matmul=True)
    assert steps == predict_trace(trace(), ["T4", "H200"], tf32_matmul=True)
    alone = operator_times(list(trace().operators), [gpu_spec("T4")], tf32_matmul=True)
    assert (times.value[:, 0] == alone.value[:, 0]).all()
    per_step = sum(t * op.count for t, op in zip(times.value[:, 1], trace().operators, strict=True))
    assert math.isclose(per_step, steps["H200"].total.value, rel_tol=1e-12)


def test_operator_times_kept_per_operator_and_gpu_equal_a_fresh_computation() -> None:
    """Issue #46: each (operator, GPU) is computed once per process; a call mixing kept rows
    and new ones (another GPU, another operator, the tf32 flag) gives what a fresh call gives."""
    from advisor.prediction.kernels.model import load_model
    from advisor.prediction.kernels.predict import _ROWS
    from advisor.prediction.memo import forget_all

    forget_all()
    ops = list(trace().operators)
    gpus = [gpu_spec("T4"), gpu_spec("H200")]
    operator_times(ops[:2], gpus[:1])  # some rows kept before
    assert len(_ROWS) == 2
    bigger = Operator("linear", "forward", "aten.addmm", {"B": 1, "M": 4096, "N": 64, "K": 512})
    for tf32 in (False, True):
        mixed = operator_times([*ops, bigger], gpus, tf32_matmul=tf32)
        unkept = load_model.__wrapped__()  # the shipped model read again: no rows kept for it
        fresh = operator_times([*ops, bigger], gpus, unkept, tf32_matmul=tf32)
        for name in ("value", "low", "high", "measured", "same_chip", "tensor_cores"):
            assert (getattr(mixed, name) == getattr(fresh, name)).all(), name
        assert mixed.reasons == fresh.reasons
    assert len(_ROWS) == 2 * 5 * 2  # (operators x GPUs) per tf32 flag, each once
