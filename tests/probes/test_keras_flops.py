"""The same network reports the same FLOPs per sample and parameters in both frameworks."""

from __future__ import annotations

import pytest
from advisor.search_spaces.workloads import get
from advisor.search_spaces.workloads.counting import trainable_parameters

pytestmark = pytest.mark.slow  # imports torch and TensorFlow


def _keras_flops_per_sample(name: str) -> float:
    from advisor.probes.keras_runner import flops_per_training_sample

    setup = get(name).builder("keras")(batch_size=4, n_train=4, n_val=4, seed=0)
    flops, method = flops_per_training_sample(setup)
    assert flops is not None, method
    return flops


@pytest.mark.parametrize("name", ["fcn", "simple-cnn", "vgg-1"])
def test_flops_per_sample_match_torch_probe(name: str) -> None:
    import torch
    from advisor.probes.torch_runner import flops_per_iteration

    setup = get(name).builder("torch")(batch_size=4, n_train=4, n_val=4, seed=0)
    batch = next(iter(setup.train_loader))
    torch_per_sample = flops_per_iteration(setup, batch) / len(batch[0])
    keras_per_sample = _keras_flops_per_sample(name)
    assert keras_per_sample == pytest.approx(torch_per_sample, rel=0.10)  # the bar
    assert keras_per_sample == pytest.approx(torch_per_sample, rel=0.001)  # what we achieve
    assert torch.get_num_threads() >= 1


def test_lstm_flops_match_with_the_rnn_formulas() -> None:
    """torch's FlopCounterMode misses the fused CPU LSTM kernel unless given its formula."""
    import torch
    from advisor.probes.torch_rnn_flops import rnn_flop_formulas
    from torch.utils.flop_counter import FlopCounterMode

    setup = get("lstm").builder("torch")(batch_size=2, n_train=2, n_val=2, seed=0)
    x, y = next(iter(setup.train_loader))
    with FlopCounterMode(display=False) as plain:
        setup.loss_fn(setup.model(x), y).backward()
    with FlopCounterMode(display=False, custom_mapping=rnn_flop_formulas()) as full:
        setup.loss_fn(setup.model(x), y).backward()
    keras_per_sample = _keras_flops_per_sample("lstm")
    hidden, steps = 200, 35
    recurrent = 2 * 3 * 2 * steps * 4 * hidden * (2 * hidden)  # 2 layers, fwd+bwd, 2/MAC
    assert full.get_total_flops() / 2 == pytest.approx(keras_per_sample, rel=0.01)
    assert (full.get_total_flops() - plain.get_total_flops()) / 2 == pytest.approx(recurrent)
    assert torch.is_tensor(x)


@pytest.mark.parametrize("name", ["fcn", "simple-cnn", "lstm"])
def test_parameter_counts_equal_across_frameworks(name: str) -> None:
    counts = {
        fw: trainable_parameters(
            get(name).builder(fw)(batch_size=2, n_train=2, n_val=2, seed=0).model
        )
        for fw in ("torch", "keras")
    }
    assert counts["torch"] == counts["keras"] == get(name).parameters
