"""Every built-in workload builds in each framework it declares and really trains a few steps,
with the same trainable parameter count in both (the count recorded in the registry)."""

from __future__ import annotations

import math

import pytest
from advisor.search_spaces.workloads import all_workloads, get
from advisor.search_spaces.workloads.counting import trainable_parameters

BATCH = 2
STEPS = 2
# Tracing ResNet-50 / GoogLeNet's train step takes 10-20 s on 2 cores: train those eagerly
# here (the traced path is what the probe tests run, on smaller networks).
EAGER = {"resnet50", "googlenet"}
# Batch norm over 2 samples at ResNet-50's 1x1 last stage divides by their tiny spread and
# blows the weights up: give it a batch where the statistics mean something.
BATCH_FOR = {"resnet50": 16}
CASES = [(w.name, fw) for w in all_workloads() for fw in w.frameworks]


@pytest.mark.slow
@pytest.mark.parametrize(("name", "framework"), CASES)
def test_builds_and_trains_two_steps(name: str, framework: str) -> None:
    workload = get(name)
    batch = BATCH_FOR.get(name, BATCH)
    setup = workload.builder(framework)(
        batch_size=batch,
        n_train=batch * STEPS,
        n_val=batch,
        seed=0,
        lr=1e-3,  # the recipes' lr 0.1 is meant for real batches, not these
        unknown_hyperparameter=1,
    )
    assert trainable_parameters(setup.model) == workload.parameters
    if framework == "torch":
        from advisor.probes.torch_runner import train
    else:
        from advisor.probes.keras_runner import train

        setup.model.run_eagerly = name in EAGER
    result = train(setup, epochs=1)
    assert result["iterations"] == STEPS
    assert math.isfinite(result["train_loss"][0]) and math.isfinite(result["val_loss"][0])
    assert result["runtime_s"] > 0 and len(result["validation_s"]) == 1


@pytest.mark.slow
def test_hyperparameters_reach_the_keras_optimizer() -> None:
    setup = get("vgg-1").builder("keras")(
        batch_size=BATCH, n_train=BATCH, n_val=BATCH, lr=0.003, momentum=0.8, optimizer="momentum"
    )
    opt = setup.model.optimizer
    assert type(opt).__name__ == "SGD"
    assert float(opt.learning_rate) == pytest.approx(0.003)
    assert float(opt.momentum) == pytest.approx(0.8)
