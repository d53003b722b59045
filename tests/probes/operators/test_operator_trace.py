"""The PyTorch operator trace (issue #26): what a training step launches, forward, backward
and optimizer, traced on the meta device or by a real step."""

from __future__ import annotations

import json
from typing import Any

import pytest
import torch
from advisor.probes.operators import (
    Operator,
    OperatorTrace,
    local_feasibility,
    operator_trace_of,
    render_shares,
    render_top,
    top_operators,
    trace_step,
    trace_torch_workload,
    with_operator_trace,
)
from advisor.probes.operators.multi_tensor import CHUNK_SIZE, launches
from advisor.probes.result import ProbeResult
from repo_paths import HELPERS, ROOT
from torch import nn


def _trace(model: nn.Module, x: torch.Tensor, y: torch.Tensor, opt: Any = None) -> OperatorTrace:
    opt = opt or torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    return trace_step(model, nn.CrossEntropyLoss(), opt, x, y, workload="t", batch_size=len(x))


def _find(trace: OperatorTrace, kind: str, phase: str, **match: Any) -> list[Operator]:
    return [
        o
        for o in trace.operators
        if o.kind == kind
        and o.phase == phase
        and all(o.dims.get(k) == v or o.op == v for k, v in match.items())
    ]


def test_linear_backward_is_two_products_of_the_forward_shapes() -> None:
    b = 32
    model = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 4))
    trace = _trace(model, torch.randn(b, 8), torch.randint(0, 4, (b,)))
    forward = {(o.dims["M"], o.dims["N"], o.dims["K"]) for o in _find(trace, "linear", "forward")}
    assert forward == {(b, 16, 8), (b, 4, 16)}  # addmm: M x K by K x N
    backward = [(o.dims["M"], o.dims["N"], o.dims["K"]) for o in _find(trace, "linear", "backward")]
    # the second layer: data grad (B x 4 by 4 x 16), weight grad (4 x B by B x 16); the first
    # layer's input needs no gradient, so only its weight grad (16 x B by B x 8)
    assert sorted(backward) == sorted([(b, 16, 4), (4, 16, b), (16, 8, b)])
    for o in _find(trace, "linear", "backward"):
        assert o.flops == 2.0 * o.dims["M"] * o.dims["N"] * o.dims["K"]
    assert [o.op for o in _find(trace, "elementwise", "backward")].count("gelu_backward") == 1
    assert len(_find(trace, "reduction", "backward")) == 2  # the two bias gradients


def test_conv_backward_is_data_and_weight_gradient_convolutions() -> None:
    model = nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 4, 3, stride=2), nn.Flatten()
    )
    x = torch.randn(2, 3, 16, 16)
    trace = _trace(model, x, torch.randint(0, 4 * 7 * 7, (2,)))
    fwd = _find(trace, "conv", "forward")
    assert [(o.dims["Cin"], o.dims["Cout"], o.dims["H"], o.dims["stride"]) for o in fwd] == [
        (3, 8, 16, 1),
        (8, 4, 16, 2),
    ]
    assert fwd[0].flops == 2.0 * 2 * 8 * 16 * 16 * 3 * 9  # 2 x outputs x (Cin x k x k)
    bwd = _find(trace, "conv", "backward")
    roles = sorted((o.dims["Cin"], o.op) for o in bwd)
    # the first conv's input needs no gradient: no data_grad for it
    assert roles == [(3, "weight_grad"), (8, "data_grad"), (8, "weight_grad")]
    by_dims = {(o.dims["Cin"], o.dims["Cout"]): o.flops for o in fwd}
    for o in bwd:  # each gradient convolution costs the forward's FLOPs
        assert o.dims == next(f.dims for f in fwd if f.dims["Cin"] == o.dims["Cin"])
        assert o.flops == by_dims[(o.dims["Cin"], o.dims["Cout"])]
    assert [o.op for o in _find(trace, "elementwise", "backward")].count("threshold_backward") == 1


def test_views_launch_nothing_and_dropout_is_cudas_fused_kernel() -> None:
    model = nn.Sequential(nn.Linear(8, 8), nn.Dropout(0.5), nn.Flatten(), nn.Linear(8, 2))
    trace = _trace(model, torch.randn(4, 8), torch.randint(0, 2, (4,)))
    names = {o.name for o in trace.operators}
    assert not names & {"aten.t", "aten.view", "aten.detach", "aten.expand", "aten._unsafe_view"}
    assert "aten.native_dropout" in names and "aten.native_dropout_backward" in names
    assert "aten.bernoulli_" not in names  # the CPU's unfused path is not what CUDA runs


class _Attention(nn.Module):
    """One causal self-attention through ``F.scaled_dot_product_attention``."""

    def __init__(self, width: int, heads: int, kv_heads: int, masked: bool) -> None:
        super().__init__()
        self.heads, self.kv_heads, self.masked = heads, kv_heads, masked
        self.q = nn.Linear(width, width)
        self.kv = nn.Linear(width, 2 * width * kv_heads // heads)
        self.out = nn.Linear(width, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, w = x.shape
        q = self.q(x).view(b, t, self.heads, -1).transpose(1, 2)
        k, v = (u.view(b, t, self.kv_heads, -1).transpose(1, 2) for u in self.kv(x).chunk(2, -1))
        mask = torch.ones(t, t, dtype=torch.bool, device=x.device).tril() if self.masked else None
        gqa = self.kv_heads != self.heads
        a = nn.functional.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, is_causal=not self.masked, enable_gqa=gqa
        )
        return self.out(a.transpose(1, 2).reshape(b, t, w).mean(1))


@pytest.mark.parametrize(("kv_heads", "masked"), [(4, False), (2, False), (4, True)])
def test_attention_on_meta_is_the_fused_kernel_cuda_runs(kv_heads: int, masked: bool) -> None:
    b, t, width, heads = 2, 64, 32, 4
    with torch.device("meta"):
        model = _Attention(width, heads, kv_heads, masked)
        x, y = torch.randn(b, t, width), torch.randint(0, 4, (b,))
    trace = _trace(model, x, y)
    names = {o.name for o in trace.operators}
    fused = {n for n in names if "scaled_dot_product" in n}
    assert fused and all("_for_cpu" not in n for n in fused)
    assert any(n.endswith("_backward") for n in fused)  # the fused kernel's own backward
    assert not names & {"aten._safe_softmax", "aten._softmax"}  # no math path
    assert ("aten.tril" in names) == masked  # the model's own mask, never the math path's
    scores = b * heads * t * t  # what a math path adds, copies and softmaxes
    big = [o for o in trace.operators if o.kind in ("elementwise", "copy") and
           o.dims.get("numel", 0) >= scores]  # fmt: skip
    assert big == [] if not masked else all(o.dims["numel"] == scores for o in big)
    qk = [o for o in trace.operators if o.op == "sdpa_qk"]
    assert [(o.dims["B"], o.dims["M"], o.dims["N"], o.dims["K"]) for o in qk] == [
        (b * heads, t, t, width // heads)
    ]
    # FlashAttention-2's products: 2 forward, 5 backward (the scores recomputed), the
    # causal upper half skipped, the softmax on chip
    products = {ph: [o for o in trace.operators if o.op.startswith("sdpa_") and o.phase == ph]
                for ph in ("forward", "backward")}  # fmt: skip
    assert [len(products["forward"]), len(products["backward"])] == [2, 5]
    assert not [o for o in trace.operators if o.kind == "softmax" and o.op.startswith("sdpa")]
    share = 1.0 if masked else 0.5
    assert qk[0].flops == 2.0 * b * heads * t * t * (width // heads) * share


def test_multi_tensor_apply_launch_limits() -> None:
    # depth 1: at most 110 tensors a launch (CUDA < 13), 96 with a list of scalars
    assert [x.tensors for x in launches([10] * 111, depth=1)] == [110, 1]
    assert [x.tensors for x in launches([10] * 97, depth=1, scalar_list=True)] == [96, 1]
    assert [x.tensors for x in launches([10] * 49, depth=3)] == [48, 1]
    assert [x.tensors for x in launches([10] * 771, depth=1, cuda_major=13)] == [770, 1]
    # at most 320 blocks of 65,536 elements; a cut tensor carries over to the next launch
    runs = launches([320 * CHUNK_SIZE + 5, 7, 0], depth=2)
    assert [(x.tensors, x.blocks, x.elements) for x in runs] == [
        (1, 320, 320 * CHUNK_SIZE),
        (2, 2, 12),
    ]
    assert launches([0, 0], depth=1) == []
    with pytest.raises(ValueError, match="depth"):
        launches([1], depth=6)


def test_optimizer_is_recorded_as_foreach_launches_per_step() -> None:
    with torch.device("meta"):  # 8193 x 2560 weights: 321 chunks, so 2 launches an op
        model = nn.Sequential(nn.Linear(8193, 2560, bias=False))
        x, y = torch.empty(4, 8193), torch.empty(4, dtype=torch.long)
    for opt, ops in [
        (torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9), ["mul", "add", "add"]),
        (
            torch.optim.AdamW(model.parameters(), lr=1e-3),
            ["mul", "lerp", "mul", "addcmul", "sqrt", "div", "add", "addcdiv"],
        ),
    ]:
        trace = _trace(model, x, y, opt)
        steps = [o for o in trace.operators if o.phase == "optimizer"]
        assert all(o.kind == "optimizer" and o.dims["foreach"] == 1 for o in steps)
        assert sum(o.count for o in steps) == 2 * len(ops)  # the step counter is host-side
        assert sorted(o.op for o in steps for _ in range(o.count // 2)) == sorted(ops)
        assert any("foreach (multi-tensor), CUDA's default" in n for n in trace.notes)
        assert opt.param_groups[0]["foreach"] is None  # the builder's setting is restored


@pytest.mark.slow  # two real CPU steps
def test_meta_and_executed_traces_of_a_built_in_workload_agree() -> None:
    for workload in ("simple-cnn", "lstm"):
        meta = trace_torch_workload(workload, 4, mode="meta")
        run = trace_torch_workload(workload, 4, mode="executed")
        assert not meta.executed and run.executed
        assert [(o.key, o.count) for o in meta.operators] == [
            (o.key, o.count) for o in run.operators
        ]
        assert meta.memory_bytes == run.memory_bytes
    # the LSTM is traced as cuDNN's per-step products, whatever device traced it
    steps = [o for o in meta.operators if o.op == "recurrent"]
    assert [o.count for o in steps] == [2 * 35]  # 2 layers x 35 time steps, same shapes


@pytest.mark.parametrize("workload", ["fcn", "resnet50", "vgg-2", "googlenet"])
def test_built_in_workloads_trace_on_the_meta_device(workload: str) -> None:
    from advisor.search_spaces.workloads import get

    trace = trace_torch_workload(workload, 8)
    assert not trace.executed and trace.parameters == get(workload).parameters
    assert set(trace.launches_by_phase()) == {"forward", "backward", "optimizer"}
    assert trace.memory_bytes["parameters"] == 4 * trace.parameters


def test_user_builders_trace_and_fall_back_to_a_real_step(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.syspath_prepend(str(ROOT))
    monkeypatch.syspath_prepend(str(HELPERS))
    mine = trace_torch_workload("examples.my_torch_model:build", 64)
    assert not mine.executed and mine.parameters == 32 * 256 + 256 + 256 * 256 + 256 + 256 * 4 + 4
    gated = trace_torch_workload("trace_user_models:build_data_dependent", 16)
    assert gated.executed and "meta-device trace failed" in gated.notes[0]
    with pytest.raises(RuntimeError):
        trace_torch_workload("trace_user_models:build_data_dependent", 16, mode="meta")


def test_trace_rides_with_the_probe_result_through_json() -> None:
    trace = trace_torch_workload("fcn", 16)
    probe = ProbeResult("fcn", "torch", 16, "cpu", 2, iteration_s=(1.0, 0.5))
    kept = with_operator_trace(probe, trace)
    back = ProbeResult.from_json(kept.to_json())
    assert operator_trace_of(back) == trace
    old = json.loads(probe.to_json())
    old.pop("operator_trace")  # a result stored before the field existed
    assert operator_trace_of(ProbeResult.from_dict(old)) is None
    bad = {**json.loads(kept.to_json()), "operator_trace": {"workload": "fcn"}}
    with pytest.raises(ValueError, match="operator_trace"):
        ProbeResult.from_dict(bad)
    with pytest.raises(ValueError, match="batch 16"):
        with_operator_trace(ProbeResult("fcn", "torch", 32, "cpu", 2, iteration_s=(1, 1)), trace)


def test_feasibility_and_summaries() -> None:
    trace = trace_torch_workload("fcn", 64)
    fits = local_feasibility(trace, available_bytes=8 * 2**30, cpu_flops_per_s=50e9)
    assert fits.feasible and fits.estimated_step_s == pytest.approx(trace.flops / 50e9)
    small = local_feasibility(trace, available_bytes=2**20, cpu_flops_per_s=50e9)
    assert not small.feasible and "GiB available" in small.reason
    slow = local_feasibility(trace, available_bytes=8 * 2**30, cpu_flops_per_s=1e6)
    assert not slow.feasible and "s a step" in slow.reason
    assert local_feasibility(trace).cpu_flops_per_s > 1e8  # measured here

    def seconds(o: Operator) -> float:  # a stand-in for the GPU model: a roofline
        return max(o.flops / 10e12, o.bytes / 500e9) + 5e-6

    top = top_operators(trace, seconds, n=5)
    assert len(top) == 5 and top == sorted(top, key=lambda s: s.seconds, reverse=True)
    assert sum(s.share for s in top_operators(trace, seconds, n=1000)) == pytest.approx(1.0)
    assert "share" in render_shares(top).splitlines()[0]
    text = render_top(trace, by="flops", n=3)
    assert text.startswith("fcn, batch 64:") and len(text.splitlines()) == 5
    assert "conv" in text.splitlines()[2]


def test_the_cpu_rate_is_the_fastest_product_with_its_spread_and_the_load(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue #46: the reading a busy machine moves least (the fastest product), the median
    and slowest beside it, and the cores other processes kept busy; a too-slow verdict says
    them all."""
    from advisor.probes.operators import feasibility

    rate = feasibility.measured_cpu_rate()
    assert rate.value >= rate.median >= rate.slowest > 0 and rate.products == 20
    assert rate.others_cores is None or 0 <= rate.others_cores <= rate.cores
    if rate.threads > 1:  # one thread's products too, times the threads (a prior: linear)
        assert rate.one_thread is not None and rate.value >= rate.one_thread * rate.threads
    assert feasibility.measured_cpu_flops_per_s() == rate.value  # measured once per process
    held = feasibility.CpuRate(100e9, 60e9, 20e9, 20, 1.2, 2)
    monkeypatch.setattr(feasibility, "measured_cpu_rate", lambda: held)
    slow = local_feasibility(trace_torch_workload("fcn", 64), max_step_s=1e-9)
    assert slow.cpu_flops_per_s == 100e9 and not slow.feasible
    assert (
        "100 GFLOP/s (fastest of 20 products; median 60, slowest 20; 1.2 of 2 cores busy "
        "elsewhere)" in slow.reason
    )
