"""Generated, learnable stand-ins for public datasets that cannot be downloaded here.

Images: every class has a fixed random prototype (8x8 pattern upsampled to the image size); a sample is its class prototype,
randomly scaled and shifted, plus Gaussian noise (CIFAR-10 / X-ray shaped, learnable).
Tokens: a Zipf-distributed token stream where each token, with probability ``follow``, is a
fixed function of the previous one (Penn Treebank shaped, learnable by a language model).
All arrays are numpy; images are channels-last (N, H, W, C) float32, labels int64. Torch
builders transpose to (N, C, H, W) with :func:`to_channels_first`; channels-first data goes
to Keras through :func:`to_channels_last`.
"""

from __future__ import annotations

import numpy as np


def class_images(
    n: int,
    height: int,
    width: int,
    channels: int,
    n_classes: int,
    seed: int = 0,
    noise: float = 0.5,
) -> tuple[np.ndarray, np.ndarray]:
    """Return ``(x, y)``: ``n`` images of shape (H, W, C) and their class labels."""
    if n < 0 or height <= 0 or width <= 0 or channels <= 0 or n_classes < 2:
        raise ValueError(
            f"need n >= 0, positive sizes and n_classes >= 2, but got n={n}, "
            f"shape=({height}, {width}, {channels}), n_classes={n_classes}"
        )
    # The prototypes depend only on the shape and class count (not the seed), so training
    # and validation sets generated with different seeds describe the same task.
    proto_rng = np.random.default_rng(1_000_003 * n_classes + height)
    coarse = proto_rng.normal(size=(n_classes, 8, 8, channels)).astype(np.float32)
    protos = _resize_nearest(coarse, height, width)
    rng = np.random.default_rng(seed)
    y = rng.integers(0, n_classes, size=n)
    x = np.empty((n, height, width, channels), dtype=np.float32)
    chunk = 256  # bounded temporary memory for large images (224x224x3)
    for start in range(0, n, chunk):
        stop = min(n, start + chunk)
        scale = rng.uniform(0.6, 1.4, size=(stop - start, 1, 1, 1)).astype(np.float32)
        block = protos[y[start:stop]] * scale
        shift = int(rng.integers(-2, 3))
        block = np.roll(block, shift, axis=(1, 2))
        block += rng.normal(scale=noise, size=block.shape).astype(np.float32)
        x[start:stop] = block
    return x, y.astype(np.int64)


def zipf_tokens(
    n_sequences: int,
    seq_len: int,
    vocab: int,
    seed: int = 0,
    follow: float = 0.5,
    exponent: float = 1.2,
) -> tuple[np.ndarray, np.ndarray]:
    """Return ``(x, y)`` int64 arrays of shape (n_sequences, seq_len); ``y`` is ``x`` shifted
    by one token (next-token targets)."""
    if n_sequences < 0 or seq_len <= 0 or vocab < 2 or not 0.0 <= follow <= 1.0:
        raise ValueError(
            f"need n_sequences >= 0, seq_len > 0, vocab >= 2 and 0 <= follow <= 1, but got "
            f"n_sequences={n_sequences}, seq_len={seq_len}, vocab={vocab}, follow={follow}"
        )
    successor = np.random.default_rng(7_919 + vocab).permutation(vocab)
    rng = np.random.default_rng(seed)
    fresh = np.minimum(rng.zipf(exponent, size=(n_sequences, seq_len + 1)) - 1, vocab - 1)
    keep = rng.random(size=(n_sequences, seq_len + 1)) < follow
    stream = np.empty((n_sequences, seq_len + 1), dtype=np.int64)
    stream[:, 0] = fresh[:, 0]
    for j in range(1, seq_len + 1):
        stream[:, j] = np.where(keep[:, j], successor[stream[:, j - 1]], fresh[:, j])
    return stream[:, :-1].copy(), stream[:, 1:].copy()


def to_channels_first(x: np.ndarray) -> np.ndarray:
    """(N, H, W, C) -> contiguous (N, C, H, W)."""
    return np.ascontiguousarray(np.transpose(x, (0, 3, 1, 2)))


def to_channels_last(x: np.ndarray) -> np.ndarray:
    """(N, C, H, W) -> contiguous (N, H, W, C)."""
    return np.ascontiguousarray(np.transpose(x, (0, 2, 3, 1)))


def _resize_nearest(images: np.ndarray, height: int, width: int) -> np.ndarray:
    rows = (np.arange(height) * images.shape[1] // height).clip(0, images.shape[1] - 1)
    cols = (np.arange(width) * images.shape[2] // width).clip(0, images.shape[2] - 1)
    return images[:, rows][:, :, cols]
