"""The traced step's peak of live tensor bytes (issue #34), from PyTorch's MemTracker."""

from __future__ import annotations

import torch
from advisor.probes.operators import trace_step
from advisor.probes.operators.peak_memory import PEAK_KEYS
from torch import nn

N, B = 512, 4
W = N * N * 4  # one weight's bytes


def _sum_loss(out: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return (out * target).sum()


def _trace(model: nn.Module, opt: torch.optim.Optimizer, device: str) -> dict[str, int]:
    x = torch.ones(B, N, device=device)
    y = torch.ones(B, N, device=device)
    return trace_step(model, _sum_loss, opt, x, y, workload="t", batch_size=B).peak_memory


def test_peak_of_a_linear_step_is_weights_gradient_and_batch() -> None:
    with torch.device("meta"):
        model = nn.Linear(N, N, bias=False)
    peak = _trace(model, torch.optim.SGD(model.parameters(), lr=0.1), "meta")
    assert set(peak) == set(PEAK_KEYS)
    # weight + its gradient + x, y: the forward's output and its gradient (B x N) may be live
    # (a gradient autograd has just computed counts as a backward temporary until accumulated)
    assert peak["parameters"] == W and peak["gradients"] + peak["backward_temporaries"] >= W
    assert peak["batch"] == 2 * B * N * 4
    assert 2 * W + 2 * B * N * 4 <= sum(peak.values()) <= 2 * W + 5 * B * N * 4


def test_adam_peak_holds_its_state_and_multi_tensor_temporaries() -> None:
    with torch.device("meta"):
        model = nn.Sequential(nn.Linear(N, N, bias=False), nn.Linear(N, N, bias=False))
    peak = _trace(model, torch.optim.Adam(model.parameters()), "meta")
    assert peak["optimizer_state"] >= 2 * 2 * W  # two moments per weight
    assert peak["optimizer_temporaries"] > 0  # the foreach step's intermediate lists


def test_meta_and_real_steps_track_the_same_peak() -> None:
    def build(device: str) -> tuple[nn.Module, torch.optim.Optimizer]:
        torch.manual_seed(0)
        with torch.device(device):
            m = nn.Sequential(nn.Linear(N, N), nn.GELU(), nn.Linear(N, 10))
        return m, torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)

    def peak(device: str) -> dict[str, int]:
        m, opt = build(device)
        x, y = torch.ones(B, N, device=device), torch.zeros(B, dtype=torch.long, device=device)
        return trace_step(
            m, nn.CrossEntropyLoss(), opt, x, y, workload="t", batch_size=B
        ).peak_memory

    meta, real = peak("meta"), peak("cpu")
    assert meta and sum(meta.values()) == sum(real.values())


def test_a_frozen_parameter_does_not_stop_the_tracker() -> None:
    with torch.device("meta"):
        model = nn.Sequential(nn.Embedding(100, N), nn.Linear(N, 10))
    model[0].weight.requires_grad_(False)
    x = torch.zeros(B, dtype=torch.long, device="meta")
    y = torch.zeros(B, dtype=torch.long, device="meta")
    opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.1)
    trace = trace_step(model, nn.CrossEntropyLoss(), opt, x, y, workload="t", batch_size=B)
    assert trace.peak_memory and not any("not tracked" in n for n in trace.notes)
    assert trace.peak_memory["parameters"] == (100 * N + N * 10 + 10) * 4
