"""The micro-batch gradients the gradient noise scale is estimated from, taken by each
framework (:mod:`advisor.probes.gradient_noise` holds the estimator): PyTorch and Keras,
each imported only when called, the measurement time-boxed and memory-capped."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
from advisor.probes.gradient_noise import (
    CHUNKS,
    MIN_NOISE_BATCHES,
    NOISE_BATCHES,
    NOISE_MEMORY,
    NOISE_SECONDS,
    NoiseScale,
    estimate_pooled,
)


def torch_gradient_noise(
    model: Any,
    loss_fn: Any,
    batches: Iterable[tuple[Any, Any]],
    *,
    max_batches: int = NOISE_BATCHES,
    max_seconds: float | None = NOISE_SECONDS,
    chunks: int = CHUNKS,
) -> NoiseScale | None:
    """Measure ``B_simple`` on a PyTorch model at its current weights (no optimizer step).

    Each ``(inputs, targets)`` batch (already on the model's device) is split into ``chunks``
    micro-batches of ``b = B // chunks`` samples; each one's mean gradient is taken with
    ``loss.backward()`` (the FLOPs of one full pass per batch), and the pooled estimator
    (:func:`estimate_pooled`) uses every pair of micro-batches over all batches. The model's
    ``.grad`` buffers are left cleared. Returns None when fewer than 2 batches of at least
    ``chunks`` samples came (the interval is a bootstrap over batches). ``max_seconds``
    time-boxes it (at least ``MIN_NOISE_BATCHES`` batches); ``NOISE_MEMORY`` caps the batches.
    """
    import torch

    params = [p for p in model.parameters() if p.requires_grad]
    max_batches = _memory_cap(max_batches, 4 * sum(p.numel() for p in params))
    start = time.perf_counter()

    def chunk_grad(x: Any, y: Any) -> torch.Tensor:
        for p in params:
            p.grad = None
        loss_fn(model(x), y).backward()
        return torch.cat(
            [(p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1) for p in params]
        ).detach()

    model.train()
    sums, sq, size = _batch_sums(
        batches,
        chunk_grad,
        lambda g: float(g.double().square().sum()),
        lambda total: total,
        _Box(chunks, max_batches, max_seconds, start),
    )
    for p in params:
        p.grad = None
    if size is None or len(sums) < 2:
        return None
    gram = np.array([[float(torch.dot(u.double(), v.double())) for v in sums] for u in sums])
    return estimate_pooled(
        gram, np.asarray(sq), chunks, size, overhead_s=time.perf_counter() - start
    )


def keras_gradient_noise(
    model: Any,
    loss_fn: Any,
    batches: Iterable[tuple[Any, Any]],
    *,
    max_batches: int = NOISE_BATCHES,
    max_seconds: float | None = NOISE_SECONDS,
    chunks: int = CHUNKS,
) -> NoiseScale | None:
    """Measure ``B_simple`` on a Keras model with ``tf.GradientTape`` (no optimizer step).

    Same micro-batch method as :func:`torch_gradient_noise`; ``loss_fn(y_true, y_pred)`` is
    the loss ``fit`` minimises (:func:`keras_fit_loss`). ``batches`` yield ``(x, y)`` or
    ``(x, y, sample_weight)`` (the weights are not used). Returns None when fewer than 2
    usable batches came.
    """
    import tensorflow as tf

    weights = model.trainable_weights
    max_batches = _memory_cap(max_batches, 8 * sum(int(np.prod(w.shape)) for w in weights))
    start = time.perf_counter()

    def chunk_grad(x: Any, y: Any) -> Any:
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True))
        grads = tape.gradient(loss, weights)
        return tf.concat(
            [
                tf.reshape(g if g is not None else tf.zeros_like(w), [-1])
                for g, w in zip(grads, weights, strict=True)
            ],
            axis=0,
        )

    sums, sq, size = _batch_sums(
        batches,
        chunk_grad,
        lambda g: float(tf.reduce_sum(tf.cast(g, tf.float64) ** 2)),
        lambda total: np.asarray(total, dtype=np.float64),
        _Box(chunks, max_batches, max_seconds, start),
    )
    if size is None or len(sums) < 2:
        return None
    stacked = np.stack(sums)
    return estimate_pooled(
        stacked @ stacked.T, np.asarray(sq), chunks, size, overhead_s=time.perf_counter() - start
    )


@dataclass(frozen=True)
class _Box:
    """How a measurement is bounded: micro-batches per batch, batches, seconds from ``start``."""

    chunks: int
    max_batches: int
    max_seconds: float | None
    start: float


def _batch_sums(
    batches: Iterable[Any],
    chunk_grad: Callable[[Any, Any], Any],
    square_norm: Callable[[Any], float],
    keep: Callable[[Any], Any],
    box: _Box,
) -> tuple[list[Any], list[float], int | None]:
    """Per batch (``(x, y, ...)``): the sum of its ``chunks`` micro-batches' mean gradients
    (``chunk_grad``; kept as ``keep`` makes it) and the sum of their squared norms, with the
    micro-batch size. Batches stop at ``box.max_batches`` or the time box; a batch of another
    micro-batch size (a short last one) is skipped."""
    sums: list[Any] = []
    sq: list[float] = []
    size: int | None = None
    for batch in batches:
        inputs, targets = batch[0], batch[1]
        if len(sums) >= box.max_batches or _time_up(len(sums), box.start, box.max_seconds):
            break
        b = int(inputs.shape[0]) // box.chunks
        if b < 1 or (size is not None and b != size):
            continue
        size = b
        total, norms = None, 0.0
        for c in range(box.chunks):
            g = chunk_grad(inputs[c * b : (c + 1) * b], targets[c * b : (c + 1) * b])
            norms += square_norm(g)
            total = g if total is None else total + g
        sums.append(keep(total))
        sq.append(norms)
    return sums, sq, size


def _memory_cap(max_batches: int, bytes_per_batch: int) -> int:
    """At most ``NOISE_MEMORY`` of kept gradient sums (at least ``MIN_NOISE_BATCHES``)."""
    return min(max_batches, max(MIN_NOISE_BATCHES, NOISE_MEMORY // max(1, bytes_per_batch)))


def _time_up(done: int, start: float, max_seconds: float | None) -> bool:
    """The time box: at least MIN_NOISE_BATCHES, then stop once ``max_seconds`` have passed."""
    return (
        max_seconds is not None
        and done >= MIN_NOISE_BATCHES
        and time.perf_counter() - start >= max_seconds
    )


def keras_noise_for_probe(
    model: Any, train_data: Any, max_seconds: float | None = NOISE_SECONDS
) -> NoiseScale | None:
    """The noise scale of a Keras probe's compiled ``model`` measured on ``train_data`` (a
    batched dataset), time-boxed by ``max_seconds``; None when fewer than 2 usable batches
    came.

    The loss is the one ``fit`` minimises, :func:`keras_fit_loss`: the compiled loss, which
    shapes the targets to the output as ``fit`` does (1-D labels against a ``(B, 1)`` sigmoid
    output), plus the model's added losses.
    """
    return keras_gradient_noise(
        model, keras_fit_loss(model), iter(train_data), max_seconds=max_seconds
    )


def keras_fit_loss(model: Any) -> Any:
    """``loss(y_true, y_pred)`` as ``model.fit`` computes it: ``model.compute_loss``, the
    compiled loss (targets squeezed or expanded to the output's rank, as in ``fit``) plus
    regularisation losses. Calling the loss function from ``model.loss`` directly skips that
    shaping, and Keras then rejects a binary classifier's 1-D labels."""

    def loss(y_true: Any, y_pred: Any) -> Any:
        return model.compute_loss(y=y_true, y_pred=y_pred, training=True)

    return loss
