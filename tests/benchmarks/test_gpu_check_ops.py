"""benchmarks/gpu_check_ops.py (issue #26 section 6) without a GPU: the profiler's events fall
into the phase and operator kind the kernel model's prediction is grouped by."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest
from perf_fixtures import mlp_trace

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.fixture(scope="module")
def ops() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "_bench_gpu_check_ops", BENCHMARKS / "gpu_check_ops.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("aten::cudnn_convolution", "conv"),
        ("aten::convolution_backward", "conv"),
        ("aten::addmm", "matmul"),
        ("aten::bmm", "matmul"),
        ("aten::_foreach_add_", "optimizer"),
        ("aten::native_layer_norm_backward", "norm/softmax"),
        ("aten::_softmax", "norm/softmax"),
        ("aten::threshold_backward", "other"),
    ],
)
def test_profiler_names_fall_in_the_kernel_models_classes(
    ops: ModuleType, name: str, kind: str
) -> None:
    assert ops.class_of_name(name) == kind


def test_the_prediction_grouped_by_phase_and_kind_sums_to_the_step(ops: ModuleType) -> None:
    from advisor.prediction.kernels import predict_trace

    trace = mlp_trace(256, width=1024, layers=3)
    groups = ops.predicted_groups(trace, "T4")
    assert set(groups) == {("forward", "matmul"), ("forward", "other"), ("backward", "matmul"),
                           ("backward", "other"), ("optimizer", "optimizer")}  # fmt: skip
    total = predict_trace(trace, ["T4"])["T4"].total
    assert sum(v for v, _, _ in groups.values()) == pytest.approx(total.value)
    assert sum(lo for _, lo, _ in groups.values()) == pytest.approx(total.low)


@pytest.mark.slow
def test_a_profiled_cpu_step_is_split_by_phase(ops: ModuleType) -> None:
    torch = pytest.importorskip("torch")
    from torch.profiler import ProfilerActivity, profile

    class Setup:
        model = torch.nn.Sequential(
            torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4)
        )
        loss_fn = torch.nn.CrossEntropyLoss()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

    batch = (torch.randn(32, 64), torch.randint(0, 4, (32,)))
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(2):
            ops.run_step(Setup, batch, torch.device("cpu"), record=True)
    found = ops.measured_groups(prof.events(), cuda=False, steps=2)
    groups = found["groups"]
    assert groups[("forward", "matmul")] > 0 and groups[("backward", "matmul")] > 0
    assert any(phase == "optimizer" for phase, _ in groups)
    assert found["host_s_per_step"] > 0 and found["kernels_per_step"] == 0  # no GPU kernels
