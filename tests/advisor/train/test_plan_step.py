"""Each training plan runs for real here (issue #35): a few CPU steps, the loss goes down; a
checkpoint of a checkpointed run keeps the model's own names. (The plan's memory against the
step that runs: ``tests/prediction/memory/test_plan.py``.)"""

from __future__ import annotations

from typing import Any

import pytest
import sharded_steps
import torch
from sharded_steps import WIDTH

from advisor.prediction.step.plan import TrainingPlan
from advisor.train.plan_step import make_step, prepare

BATCH = 256


def _setup() -> Any:
    """Blocks of four linear + ReLU layers, residual, then a head (``sharded_steps.Blocks``)."""
    return sharded_steps.setup(layers=4)


def _batch() -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    x = torch.randn(BATCH, WIDTH, generator=g)
    return x, (x[:, :4].argmax(dim=1))


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


def test_a_checkpointed_model_saves_under_the_model_s_own_names() -> None:
    """A checkpoint of a run with checkpointed blocks resumes into the plain model (the
    per-epoch checkpoint is loaded before the plan wraps the blocks)."""
    wrapped = prepare(_setup(), TrainingPlan(checkpointing="blocks")).model
    plain = _setup().model
    assert wrapped.state_dict().keys() == plain.state_dict().keys()
    plain.load_state_dict(wrapped.state_dict())  # strict: every name matches
