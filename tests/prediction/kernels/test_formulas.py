"""The kernel model's formulas on hand-computed cases: features, trees, placement of ops."""

from __future__ import annotations

import math

import numpy as np
import pytest
from advisor.probes.operators import Operator

from advisor.prediction.kernels.features import features
from advisor.prediction.kernels.ops import place
from advisor.prediction.kernels.trees import TreeEnsemble


def test_gemm_features_and_roofline_by_hand() -> None:
    # 128^3 product on a GPU of 1 TFLOP/s, 100 GB/s, 4 SMs.
    rows = {"B": np.array([1.0]), "M": np.array([128.0]), "N": np.array([128.0]),
            "K": np.array([128.0]), "is_bmm": np.array([0.0]),
            "flops": np.array([2.0 * 128**3]), "bytes": np.array([4.0 * 3 * 128**2])}  # fmt: skip
    x, t_roof = features("gemm", rows, np.array([1e12]), np.array([1e11]), np.array([4.0]))
    t_compute, t_memory = 2 * 128**3 / 1e12, 4 * 3 * 128**2 / 1e11
    assert t_roof[0] == pytest.approx(max(t_compute, t_memory))
    intensity, waves64, fill64, waves128, fill128 = x[0, :5]
    assert intensity == pytest.approx(math.log(t_compute / t_memory))
    assert waves64 == pytest.approx(math.log(4 / 4)) and fill64 == pytest.approx(1.0)
    assert waves128 == pytest.approx(math.log(1 / 4)) and fill128 == pytest.approx(0.25)


def test_memory_features_are_bytes_over_bandwidth() -> None:
    rows = {"bytes": np.array([3.0e9]), "inputs": np.array([2.0]),
            "transcendental": np.array([0.0])}  # fmt: skip
    x, t_roof = features("elementwise", rows, np.array([1e12]), np.array([1.5e12]),
                         np.array([100.0]))  # fmt: skip
    assert t_roof[0] == pytest.approx(2e-3)
    assert x[0, 0] == pytest.approx(math.log(3.0e9 / 100))


def test_tree_ensemble_follows_its_splits() -> None:
    # One stump: x0 <= 1 -> 0.5, else -> 2.0; baseline 1.
    tree = {"feature": [0, 0, 0], "threshold": [1.0, 0, 0], "left": [1, -1, -1],
            "right": [2, -1, -1], "value": [0.0, 0.5, 2.0]}  # fmt: skip
    ens = TreeEnsemble.from_dict({"baseline": 1.0, "depth": 2, "trees": [tree, tree]})
    out = ens.predict(np.array([[0.0], [1.0], [3.0]]))
    assert out.tolist() == [2.0, 2.0, 5.0]
    assert TreeEnsemble.from_dict(ens.to_dict()).predict(np.array([[3.0]]))[0] == 5.0


def conv(role: str = "", kernel: int = 3, stride: int = 1) -> Operator:
    dims = {"B": 8, "Cin": 64, "Cout": 128, "kernel": kernel, "H": 32, "W": 32,
            "stride": stride, "padding": kernel // 2, "groups": 1}  # fmt: skip
    return Operator("conv", "backward" if role else "forward", "aten.convolution", dims, op=role)


def test_convolutions_become_implicit_products() -> None:
    fwd = place(conv())
    assert fwd.family == "conv" and fwd.precision == "tf32"  # cuDNN TF32 by default
    assert (fwd.cols["M"], fwd.cols["N"], fwd.cols["K"]) == (8 * 32 * 32, 128, 64 * 9)
    assert fwd.cols["flops"] == 2.0 * 8 * 32 * 32 * 128 * 64 * 9
    one = place(conv(kernel=1))
    assert one.family == "gemm" and (one.cols["M"], one.cols["N"], one.cols["K"]) == (8192, 128, 64)
    wgrad = place(conv("weight_grad"))
    assert wgrad.family == "gemm" and (wgrad.cols["M"], wgrad.cols["K"]) == (128, 8 * 32 * 32)
    dgrad = place(conv("data_grad", stride=2))
    assert dgrad.family == "conv" and dgrad.cols["N"] == 64 and dgrad.cols["hw"] == 32 * 32
    assert "conv_geometry" in dgrad.reasons and "conv_geometry" not in fwd.reasons
    assert place(conv(), tf32_conv=False).precision == "fp32"


def test_matmul_precision_follows_pytorch_defaults() -> None:
    mm = Operator("linear", "forward", "aten.mm", {"B": 1, "M": 64, "N": 64, "K": 64})
    assert place(mm).precision == "fp32"  # allow_tf32 is False for matmul since 1.12
    assert place(mm, tf32_matmul=True).precision == "tf32"
    bf16 = Operator("linear", "forward", "aten.mm", {"B": 1, "M": 64, "N": 64, "K": 64},
                    dtype="bfloat16")  # fmt: skip
    placed = place(bf16)
    assert placed.precision == "bf16" and placed.cols["bytes"] == 2 * 3 * 64 * 64


def test_unmeasured_kinds_are_memory_traffic_with_a_reason() -> None:
    opt = Operator("optimizer", "optimizer", "aten._foreach_add_", {"numel": 1000, "tensors": 4},
                   bytes=20_000.0)  # fmt: skip
    placed = place(opt)
    assert placed.family == "elementwise" and placed.cols["bytes"] == 20_000.0
    assert placed.reasons == ("unmeasured_kind",)
    ln_back = Operator("layernorm", "backward", "aten.native_layer_norm_backward",
                       {"B": 10, "H": 100})  # fmt: skip
    assert "backward_traffic" in place(ln_back).reasons


def test_exported_trees_reproduce_scikit_learn_exactly() -> None:
    # Thresholds at data values (many distinct values: bins at quantiles) must survive the
    # JSON round trip: a rounded threshold sends the rows at that value the other way.
    pytest.importorskip("sklearn")
    import json

    from sklearn.ensemble import HistGradientBoostingRegressor

    from advisor.prediction.kernels.trees import from_sklearn

    rng = np.random.default_rng(0)
    x = np.log(rng.integers(1, 5000, size=(3000, 3)).astype(float))
    y = np.sin(3 * x[:, 0]) + x[:, 1] * x[:, 2] / 10
    model = HistGradientBoostingRegressor(max_iter=30, random_state=0).fit(x, y)
    shipped = TreeEnsemble.from_dict(json.loads(json.dumps(from_sklearn(model).to_dict())))
    assert np.allclose(shipped.predict(x), model.predict(x), rtol=0, atol=1e-5)


def test_few_and_many_rows_walk_the_trees_to_the_same_values() -> None:
    from advisor.prediction.kernels.model import load_model
    from advisor.prediction.kernels.trees import ROWS_ALL_AT_ONCE

    trees = load_model().families["gemm"].trees
    x = np.random.default_rng(0).normal(size=(3 * ROWS_ALL_AT_ONCE, trees.feature.max() + 1))
    many = trees.predict(x)  # tree by tree
    few = np.concatenate([trees.predict(x[i : i + 7]) for i in range(0, len(x), 7)])
    assert np.allclose(few, many, rtol=0, atol=1e-12)
