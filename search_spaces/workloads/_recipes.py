"""Optimizers from hyperparameters, the same way in both frameworks.

The built-in workloads take the hyperparameters ``optimizer`` (sgd, momentum, adam, adamw,
adadelta, rmsprop), ``lr``, ``momentum`` and ``weight_decay``; a builder passes its own
recipe's defaults and the user's values override them. Frameworks are imported inside the
functions.
"""

from __future__ import annotations

from typing import Any

from advisor.errors import unknown_value_error

OPTIMIZERS = ("sgd", "momentum", "adam", "adamw", "adadelta", "rmsprop")


def _check(name: str, lr: float, momentum: float, weight_decay: float) -> str:
    key = name.lower()
    if key not in OPTIMIZERS:
        raise unknown_value_error("optimizer", name, OPTIMIZERS)
    if lr <= 0 or not 0.0 <= momentum < 1.0 or weight_decay < 0:
        raise ValueError(
            f"need lr > 0, 0 <= momentum < 1 and weight_decay >= 0, but got lr={lr}, "
            f"momentum={momentum}, weight_decay={weight_decay}"
        )
    return key


def torch_optimizer(
    params: Any, optimizer: str, lr: float, momentum: float = 0.9, weight_decay: float = 0.0
) -> Any:
    """A ``torch.optim`` optimizer over ``params``."""
    import torch

    key = _check(optimizer, lr, momentum, weight_decay)
    if key == "sgd":
        return torch.optim.SGD(params, lr=lr, weight_decay=weight_decay)
    if key == "momentum":
        return torch.optim.SGD(params, lr=lr, momentum=momentum, weight_decay=weight_decay)
    if key == "adam":
        return torch.optim.Adam(params, lr=lr, weight_decay=weight_decay)
    if key == "adamw":
        return torch.optim.AdamW(params, lr=lr, weight_decay=weight_decay)
    if key == "adadelta":
        return torch.optim.Adadelta(params, lr=lr, weight_decay=weight_decay)
    return torch.optim.RMSprop(params, lr=lr, momentum=momentum, weight_decay=weight_decay)


def keras_optimizer(
    optimizer: str,
    lr: float,
    momentum: float = 0.9,
    weight_decay: float = 0.0,
    schedule: Any = None,
) -> Any:
    """A ``keras.optimizers`` optimizer (weight decay as Keras applies it: decoupled).

    ``schedule`` (a ``keras.optimizers.schedules`` object starting at ``lr``) replaces the
    constant learning rate when given.
    """
    import keras

    key = _check(optimizer, lr, momentum, weight_decay)
    wd = weight_decay or None
    if schedule is not None:
        lr = schedule
    if key == "sgd":
        return keras.optimizers.SGD(learning_rate=lr, weight_decay=wd)
    if key == "momentum":
        return keras.optimizers.SGD(learning_rate=lr, momentum=momentum, weight_decay=wd)
    if key == "adam":
        return keras.optimizers.Adam(learning_rate=lr, weight_decay=wd)
    if key == "adamw":
        return keras.optimizers.AdamW(learning_rate=lr, weight_decay=weight_decay or 0.004)
    if key == "adadelta":
        return keras.optimizers.Adadelta(learning_rate=lr, weight_decay=wd)
    return keras.optimizers.RMSprop(learning_rate=lr, momentum=momentum, weight_decay=wd)


def channels_last(model: Any) -> Any:
    """``model`` with its 4-D weights in channels-last memory layout (the network is unchanged).

    Convolutions then produce channels-last activations from ordinary NCHW batches, as Keras'
    NHWC does. On CPU this is PyTorch's recommended layout for convnets, and it matters for
    prediction, not only speed: NCHW max pooling on CPU is a scalar loop with a data-dependent
    branch (8.2 ms with 50 % zeros in its input, 3.3 ms with 97 %, against 1.07 and 1.04 ms
    channels-last), so an NCHW network speeds up as its ReLUs die during training, which a
    probe of the first iterations cannot see (docs/benchmarks.md).
    """
    import torch

    return model.to(memory_format=torch.channels_last)


def torch_loaders(
    train: tuple[Any, Any], val: tuple[Any, Any], batch_size: int, seed: int = 0
) -> tuple[Any, Any]:
    """``DataLoader`` pairs (shuffled train, ordered validation) over numpy ``(x, y)`` arrays."""
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    def dataset(xy: tuple[Any, Any]) -> Any:
        return TensorDataset(torch.from_numpy(xy[0]), torch.from_numpy(xy[1]))

    generator = torch.Generator().manual_seed(seed)
    return (
        DataLoader(dataset(train), batch_size=batch_size, shuffle=True, generator=generator),
        DataLoader(dataset(val), batch_size=batch_size, shuffle=False),
    )


def keras_compile(model: Any, optimizer: Any) -> Any:
    """Compile ``model`` (logits out) with sparse categorical cross-entropy and accuracy."""
    import keras

    model.compile(
        optimizer=optimizer,
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
    )
    return model
