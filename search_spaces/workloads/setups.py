"""What a workload builder returns: the contract between workloads and the probe runners.

A PyTorch builder returns a :class:`TorchSetup` (or the tuple ``(model, loss_fn, optimizer,
train_dataset, val_dataset)``); a Keras builder returns a :class:`KerasSetup`. Both are plain
values: importing this module imports neither framework.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class TorchSetup:
    """What a PyTorch workload builder returns.

    ``train_loader``/``val_loader`` yield ``(inputs, targets)`` batches (``val_loader`` may be
    None: no validation). ``scheduler`` (optional) is stepped once per epoch. ``data_s`` is how
    long the builder took to prepare ``data_samples`` samples (generate or load them), when it
    knows: the probe scales that part of initialisation to the full dataset size.
    """

    model: Any
    loss_fn: Any
    optimizer: Any
    train_loader: Any
    val_loader: Any = None
    scheduler: Any = None
    data_s: float | None = None
    data_samples: int | None = None

    def __post_init__(self) -> None:
        import torch

        if not isinstance(self.model, torch.nn.Module):
            raise ValueError(
                f"model must be a torch.nn.Module, but got {type(self.model).__name__}"
            )
        if not isinstance(self.optimizer, torch.optim.Optimizer):
            raise ValueError(
                f"optimizer must be a torch.optim.Optimizer, but got {type(self.optimizer).__name__}"
            )
        if not callable(self.loss_fn):
            raise ValueError(f"loss_fn must be callable, but got {self.loss_fn!r}")


@dataclass(frozen=True)
class KerasSetup:
    """What a Keras workload builder returns.

    ``model`` is a compiled ``keras.Model``. ``train`` and ``val`` are either ``(x, y)`` numpy
    arrays (batched by ``batch_size`` through :func:`advisor.probes.keras_data.as_dataset`,
    in the probe and the training run alike) or already batched ``tf.data.Dataset``
    objects; ``val`` may be None (no validation). ``callbacks`` are passed to ``fit``.
    ``n_train``/``n_val`` are the real dataset sizes to extrapolate to, when the builder knows
    them and they differ from the data given (user workloads); built-in workloads leave them
    None. ``data_s`` is how long the builder took to prepare ``data_samples`` samples, when it
    knows: the probe scales that part of initialisation to the full dataset size (as the
    PyTorch probe does).
    """

    model: Any
    train: Any
    batch_size: int
    val: Any = None
    callbacks: tuple[Any, ...] = ()
    n_train: int | None = None
    n_val: int | None = None
    data_s: float | None = None
    data_samples: int | None = None

    def __post_init__(self) -> None:
        if self.batch_size <= 0:
            raise ValueError(f"batch_size must be > 0, but got {self.batch_size}")
        if not hasattr(self.model, "fit") or not getattr(self.model, "compiled", True):
            raise ValueError(f"model must be a compiled keras.Model, but got {self.model!r}")

    def train_samples(self) -> int | None:
        """Number of training samples given (None when a dataset's size is unknown)."""
        return _samples(self.train, self.batch_size)

    def val_samples(self) -> int | None:
        """Number of validation samples given (0 without validation data)."""
        return 0 if self.val is None else _samples(self.val, self.batch_size)


def sample_count(x: Any) -> int:
    """Number of samples in ``x``: the first axis of its first array (dicts and tuples of
    arrays, as multi-input models take, are looked into)."""
    import numpy as np

    while isinstance(x, dict | tuple | list):
        x = next(iter(x.values())) if isinstance(x, dict) else x[0]
    return int(np.shape(x)[0])


def _samples(data: Any, batch_size: int) -> int | None:
    if isinstance(data, tuple | list):
        return sample_count(data[0])
    cardinality = int(data.cardinality())
    return cardinality * batch_size if cardinality >= 0 else None
