"""`resnet50` in Keras: ``keras.applications.ResNet50`` untrained (``weights=None``: nothing
is downloaded) at 32x32x3 with 10 classes; the same network as ``resnet50``."""

from __future__ import annotations

from functools import partial
from typing import Any

from advisor.search_spaces.workloads.resnet50 import CHANNELS, CLASSES, SIDE, build


def resnet50_keras(classes: int = CLASSES) -> Any:
    """ResNet-50 from ``keras.applications`` (logits out, random initial weights)."""
    import keras

    return keras.applications.ResNet50(
        weights=None,
        input_shape=(SIDE, SIDE, CHANNELS),
        classes=classes,
        classifier_activation=None,
    )


build_keras = partial(build, "keras", resnet50_keras)
