"""Count a workload's trainable parameters by building its model (imports the framework)."""

from __future__ import annotations

from typing import Any

from advisor.search_spaces.workloads._registry import Workload


def count_parameters(
    workload: Workload, framework: str | None = None, **hyperparameters: Any
) -> int:
    """Build ``workload`` in ``framework`` (default: its first) on tiny data and return the
    number of trainable parameters of its model."""
    framework = framework or workload.frameworks[0]
    setup = workload.builder(framework)(batch_size=2, n_train=2, n_val=2, seed=0, **hyperparameters)
    return trainable_parameters(setup.model)


def trainable_parameters(model: Any) -> int:
    """Trainable parameters of a ``torch.nn.Module`` or a ``keras.Model``."""
    if hasattr(model, "trainable_weights"):  # Keras
        total = 0
        for weight in model.trainable_weights:
            n = 1
            for dim in weight.shape:
                n *= int(dim)
            total += n
        return total
    return int(sum(p.numel() for p in model.parameters() if p.requires_grad))
