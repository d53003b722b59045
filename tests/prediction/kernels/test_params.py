"""The shipped parameters load and cover every catalog GPU; predictions are sane."""

from __future__ import annotations

from advisor.probes.operators import Operator
from advisor.providers.catalog import load

from advisor.prediction.kernels import catalog_gpus, load_model, predict_operator
from advisor.prediction.kernels.features import FAMILIES

FITTED = {"P4", "P100", "T4", "V100-PCIe-32GB", "A100-40GB-PCIe"}


def test_shipped_parameters_load_with_every_family() -> None:
    model = load_model()
    assert set(model.families) == set(FAMILIES)
    assert set(model.fitted_gpus("gemm")) == FITTED
    assert set(model.fitted_gpus("conv")) == FITTED - {"A100-40GB-PCIe"} | {"A100-80GB-PCIe"}
    for fm in model.families.values():
        assert fm.trees.feature.shape[0] > 10
        lo, hi = fm.interval_spec
        assert lo < 0 < hi


def test_every_catalog_gpu_has_kernel_figures() -> None:
    gpus = catalog_gpus()
    sold = {i.accelerator for i in load().instances if i.accelerator}
    nvidia = {n for n in sold if load().accelerator(n).vendor == "NVIDIA"}
    assert nvidia <= set(gpus), nvidia - set(gpus)
    assert FITTED | {"H100", "L4", "A100-80GB-PCIe", "H200", "B200", "K80"} <= set(gpus)


def test_a_large_product_runs_near_but_below_peak_everywhere() -> None:
    op = Operator("linear", "forward", "aten.mm", {"B": 1, "M": 4096, "N": 4096, "K": 4096})
    for name, gpu in catalog_gpus().items():
        t = predict_operator(op, gpu)
        assert 0 < t.low <= t.value <= t.high
        achieved = 2 * 4096**3 / t.value / (gpu.fp32_tflops * 1e12)
        assert 0.1 < achieved < 1.0, (name, achieved)


def test_bigger_kernels_take_longer() -> None:
    def add(n: int) -> float:
        op = Operator("elementwise", "forward", "aten.add", {"numel": n, "inputs": 2})
        return predict_operator(op, "T4").value

    times = [add(n) for n in (10**4, 10**6, 10**8)]
    assert times[0] < times[1] < times[2]
    # 100x the bytes takes less than 100x the time (better efficiency at size), but more
    # than a third of it; at 10^8 the T4 moves 1.2 GB at 60-100 % of its 320 GB/s.
    assert 33 < times[2] / times[1] < 100
    assert 0.6 < 1.2e9 / times[2] / 320e9 < 1.0
