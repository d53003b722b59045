"""Keras under a training plan's precision (issue #35): Keras 3's mixed-precision policies.

- ``bf16``: ``keras.config.set_dtype_policy("mixed_bfloat16")``: every layer computes in
  bfloat16 (its outputs, the activations kept for backward, are bfloat16) over float32
  variables (the master weights, their gradients and the optimizer state stay float32);
- ``fp16``: ``"mixed_float16"``, the same in float16, with loss scaling: ``Model.compile``
  wraps the optimizer in ``keras.mixed_precision.LossScaleOptimizer`` under this policy;
- ``fp32`` and ``tf32``: ``"float32"`` (TF32 is TensorFlow's default for float32 products on
  Ampere and later).

The policy applies to the layers built while it is set: a workload is built (and compiled)
inside :func:`dtype_policy`, which puts the previous global policy back afterwards.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

POLICIES = {"bf16": "mixed_bfloat16", "fp16": "mixed_float16"}


def policy_name(precision: str | None) -> str:
    """The Keras dtype policy of a plan's precision ("float32" without mixed precision)."""
    return POLICIES.get(str(precision), "float32")


@contextlib.contextmanager
def dtype_policy(precision: str | None) -> Iterator[str]:
    """Set the global Keras dtype policy of ``precision`` while the block runs (the layers
    built in it keep it); yields the policy's name."""
    import keras

    before = keras.config.dtype_policy()
    name = policy_name(precision)
    keras.config.set_dtype_policy(name)
    try:
        yield name
    finally:
        keras.config.set_dtype_policy(before)


def build_under(precision: str | None, builder: Any, **kwargs: Any) -> Any:
    """``builder(**kwargs)`` (a Keras workload's setup, compiled by the builder) built under
    ``precision``'s policy: for fp16 its optimizer is then Keras's ``LossScaleOptimizer``."""
    with dtype_policy(precision):
        return builder(**kwargs)
