"""The steps every built-in builder shares: generate its data (timed), then assemble the
PyTorch or Keras setup with the recipe's optimizer.

A built-in workload has one ``build(framework, network, ...)`` whose signature is its recipe
(the hyperparameters and their defaults, the same in every framework); its ``build_torch`` and
``build_keras`` are that function with the framework and its network fixed (the Keras module
imports the PyTorch one, never the other way). Frameworks are imported inside the functions.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from advisor.search_spaces.workloads import _recipes

XY = tuple[Any, Any]


@dataclass(frozen=True)
class Generated:
    """Generated ``(x, y)`` training and validation data and how long generating it took."""

    train: XY
    val: XY
    seconds: float

    @property
    def samples(self) -> int:
        return len(self.train[1]) + len(self.val[1])

    def converted(
        self, x: Callable[[Any], Any] | None = None, y: Callable[[Any], Any] | None = None
    ) -> Generated:
        """The same data with ``x`` applied to both inputs and ``y`` to both targets."""

        def pair(xy: XY) -> XY:
            return (xy[0] if x is None else x(xy[0]), xy[1] if y is None else y(xy[1]))

        return Generated(pair(self.train), pair(self.val), self.seconds)


def generate(
    train: Callable[[], XY], val: Callable[[], XY], x: Callable[[Any], Any] | None = None
) -> Generated:
    """Call ``train`` then ``val`` (each returns ``(x, y)``), timing both together with ``x``
    (a layout change of the inputs, when given)."""
    start = time.perf_counter()
    data = Generated(train(), val(), 0.0).converted(x=x)
    return Generated(data.train, data.val, time.perf_counter() - start)


def class_images(
    framework: str, n_train: int, n_val: int, side: int, channels: int, classes: int, seed: int
) -> Generated:
    """Generated class-prototype images (:func:`synthetic.class_images`; validation seeded
    ``seed + 1``), timed; channels-first for torch (transposed after the timing)."""
    from advisor.search_spaces.workloads import synthetic

    data = generate(
        lambda: synthetic.class_images(n_train, side, side, channels, classes, seed=seed),
        lambda: synthetic.class_images(n_val, side, side, channels, classes, seed=seed + 1),
    )
    return data.converted(x=synthetic.to_channels_first) if framework == "torch" else data


@dataclass(frozen=True)
class Recipe:
    """What every built-in recipe takes besides its network and data: the batch size, the
    seed and the optimizer's hyperparameters."""

    batch_size: int
    seed: int
    optimizer: str
    lr: float
    momentum: float
    weight_decay: float

    def torch(
        self,
        model: Callable[[], Any],
        data: Generated,
        loss_fn: Any = None,
        channels_last: bool = False,
        cosine_to: float | None = None,
        epochs: int = 1,
    ) -> Any:
        """A ``TorchSetup``: ``model()`` built after seeding torch (its weights channels-last
        with ``channels_last``: ``_recipes.channels_last``), loaders over ``data``, the
        optimizer over the trainable parameters, cross-entropy unless ``loss_fn`` is given,
        and (with ``cosine_to``) a per-epoch cosine from ``lr`` to ``cosine_to`` over
        ``epochs``."""
        import torch
        from advisor.search_spaces.workloads.setups import TorchSetup
        from torch import nn

        torch.manual_seed(self.seed)
        loaders = _recipes.torch_loaders(data.train, data.val, self.batch_size, self.seed)
        net = _recipes.channels_last(model()) if channels_last else model()
        params = [p for p in net.parameters() if p.requires_grad]
        opt = _recipes.torch_optimizer(
            params, self.optimizer, self.lr, self.momentum, self.weight_decay
        )
        scheduler = None
        if cosine_to is not None:
            scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(
                opt, T_max=max(1, int(epochs)), eta_min=cosine_to
            )
        return TorchSetup(
            model=net,
            loss_fn=nn.CrossEntropyLoss() if loss_fn is None else loss_fn,
            optimizer=opt,
            train_loader=loaders[0],
            val_loader=loaders[1],
            scheduler=scheduler,
            data_s=data.seconds,
            data_samples=data.samples,
        )

    def keras(
        self,
        model: Callable[[], Any],
        data: Generated,
        schedule: Any = None,
        callbacks: tuple[Any, ...] = (),
    ) -> Any:
        """A ``KerasSetup``: ``model()`` built after seeding Keras and compiled with the
        optimizer (its learning rate following ``schedule``, a
        ``keras.optimizers.schedules`` object, when given)."""
        import keras
        from advisor.search_spaces.workloads.setups import KerasSetup

        keras.utils.set_random_seed(self.seed)
        net = model()
        opt = _recipes.keras_optimizer(
            self.optimizer, self.lr, self.momentum, self.weight_decay, schedule
        )
        _recipes.keras_compile(net, opt)
        return KerasSetup(
            model=net,
            train=data.train,
            val=data.val,
            batch_size=self.batch_size,
            callbacks=callbacks,
            data_s=data.seconds,
            data_samples=data.samples,
        )


def keras_cosine_per_epoch(lr: float, lr_min: float, epochs: int) -> Any:
    """A Keras callback setting the learning rate per epoch like torch's CosineAnnealingLR."""
    import keras

    span = max(1, int(epochs))

    def schedule(epoch: int, _current: float) -> float:
        e = min(epoch, span)
        return lr_min + (lr - lr_min) * (1 + math.cos(math.pi * e / span)) / 2

    return keras.callbacks.LearningRateScheduler(schedule)
