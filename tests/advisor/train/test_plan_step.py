"""Each training plan runs for real here (issue #35): a few CPU steps, the loss goes down,
and the bytes saved for backward move the way the memory model under the plan says."""

from __future__ import annotations

from typing import Any

import pytest
import sharded_steps
import torch
from sharded_steps import WIDTH

from advisor.prediction.memory import MemoryTerm, StepMemory
from advisor.prediction.plan import TrainingPlan
from advisor.prediction.plan_memory import plan_memory
from advisor.train.plan_step import make_step, prepare

BATCH = 256


def _setup() -> Any:
    """Blocks of four linear + ReLU layers, residual, then a head (``sharded_steps.Blocks``)."""
    return sharded_steps.setup(layers=4)


def _batch() -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    x = torch.randn(BATCH, WIDTH, generator=g)
    return x, (x[:, :4].argmax(dim=1))


def _saved_bytes(setup: Any, plan: TrainingPlan) -> int:
    """Bytes of the distinct tensors autograd keeps for backward in one micro-step of
    ``plan`` (parameters left out), measured on the real step at the end of its forward pass
    (checkpointing's recomputation in backward runs under the same hooks)."""
    params = {p.untyped_storage().data_ptr() for p in setup.model.parameters()}
    seen: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        s = t.untyped_storage()
        if s.data_ptr() not in params:
            seen[s.data_ptr()] = s.nbytes()
        return t

    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(plan.precision)
    x, y = _batch()
    hooks = torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t)
    with hooks, torch.autocast("cpu", dtype=dtype, enabled=dtype is not None):
        loss = setup.loss_fn(setup.model(x), y)
    held = sum(seen.values())  # at the end of forward: before backward rebuilds any
    loss.backward()
    return held


PLANS = [
    TrainingPlan(),
    TrainingPlan("bf16"),
    TrainingPlan("fp16"),
    TrainingPlan("tf32"),
    TrainingPlan(accumulation=4),
    TrainingPlan(checkpointing="blocks"),
    TrainingPlan("bf16", 2, "blocks"),
]


@pytest.mark.slow
@pytest.mark.parametrize("plan", PLANS, ids=lambda p: p.key())
def test_each_plan_trains_and_its_loss_goes_down(plan: TrainingPlan) -> None:
    setup = prepare(_setup(), plan)
    step = make_step(plan, "cpu")
    batch = _batch()
    losses = [step(setup, batch, torch.device("cpu")) for _ in range(25)]
    assert losses[-1] < 0.7 * losses[0], losses


def test_the_saved_bytes_move_as_the_memory_model_says() -> None:
    """The memory model under the plan (``plan_memory`` over the float32 step's measured
    terms) brackets the bytes the real step saves under bf16 autocast (its activations plus
    autocast's weight copies) and with checkpointed blocks."""
    params = sum(p.numel() * 4 for p in _setup().model.parameters())
    fp32 = _saved_bytes(_setup(), TrainingPlan())
    base = StepMemory(BATCH, (MemoryTerm("parameters", params, params, params, "measured"),
                              MemoryTerm("activations", fp32, fp32, fp32, "measured")))  # fmt: skip
    for plan in (TrainingPlan("bf16"), TrainingPlan(checkpointing="blocks")):
        setup = prepare(_setup(), plan)
        measured = _saved_bytes(setup, plan)
        model = plan_memory(base, plan)
        kept = [t for t in model.terms if t.name != "parameters"]
        low, high = sum(t.low for t in kept), sum(t.high for t in kept)
        assert low <= measured <= high, (plan.key(), low, measured, high)
    assert _saved_bytes(prepare(_setup(), TrainingPlan(checkpointing="blocks")),
                        TrainingPlan(checkpointing="blocks")) < fp32  # fmt: skip


def test_a_checkpointed_model_saves_under_the_model_s_own_names() -> None:
    """A checkpoint of a run with checkpointed blocks resumes into the plain model (the
    per-epoch checkpoint is loaded before the plan wraps the blocks)."""
    wrapped = prepare(_setup(), TrainingPlan(checkpointing="blocks")).model
    plain = _setup().model
    assert wrapped.state_dict().keys() == plain.state_dict().keys()
    plain.load_state_dict(wrapped.state_dict())  # strict: every name matches
