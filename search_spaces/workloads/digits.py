"""28x28 digit images for the `simple-cnn` workload, made from real handwritten digits.

The source is scikit-learn's bundled digits set (``sklearn.datasets.load_digits``: 1,797 real
8x8 images, 16 grey levels, read from a file shipped inside scikit-learn, no download). Each
sample picks one of those images, resizes it bilinearly to a random 17-23 pixel square (MNIST
digits are about 20x20), places it in a 28x28 frame at a random offset of up to 2 pixels from
the centre, adds Gaussian pixel noise (sigma 0.05 on a 0..1 scale), clips to 0..1 and
standardises with MNIST's mean and standard deviation (0.1307, 0.3081). Training samples are
drawn from the first 80 % of the source images and validation samples (``subset="val"``) from
the last 20 %, so validation accuracy measures generalisation to unseen writers' digits.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
from advisor.search_spaces.workloads.kept import keep_small

SIDE = 28
TRAIN_FRACTION = 0.8
MNIST_MEAN, MNIST_STD = 0.1307, 0.3081
_CHUNK = 4096


@lru_cache(maxsize=1)
def _source() -> tuple[np.ndarray, np.ndarray]:
    from sklearn.datasets import load_digits

    data = load_digits()
    images = np.asarray(data.images, dtype=np.float32) / 16.0
    return images, np.asarray(data.target, dtype=np.int64)


@keep_small(32768)  # --tune's short runs rebuild on the same data (100 MiB at 32,768)
def digit_images(n: int, seed: int = 0, subset: str = "train") -> tuple[np.ndarray, np.ndarray]:
    """Return ``(x, y)``: ``n`` float32 images ``(n, 1, 28, 28)`` and int64 labels 0-9."""
    if n < 0 or subset not in ("train", "val"):
        raise ValueError(
            f"need n >= 0 and subset 'train' or 'val', but got n={n}, subset={subset!r}"
        )
    images, labels = _source()
    cut = int(len(images) * TRAIN_FRACTION)
    pool = np.arange(cut) if subset == "train" else np.arange(cut, len(images))
    rng = np.random.default_rng(seed)
    pick = rng.choice(pool, size=n)
    x = np.empty((n, 1, SIDE, SIDE), dtype=np.float32)
    for start in range(0, n, _CHUNK):
        stop = min(n, start + _CHUNK)
        x[start:stop, 0] = _render(images[pick[start:stop]], rng)
    return x, labels[pick]


def _render(src: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Resize each 8x8 image to a random size, place it at a random offset, add noise."""
    m = len(src)
    size = rng.integers(17, 24, size=m).astype(np.float32)  # digit box side, pixels
    offset = (SIDE - size) / 2.0
    shift = rng.integers(-2, 3, size=(m, 2)).astype(np.float32)
    # Padded source (zero border) so bilinear taps outside the digit read 0.
    padded = np.zeros((m, 10, 10), dtype=np.float32)
    padded[:, 1:9, 1:9] = src
    grid = np.arange(SIDE, dtype=np.float32) + 0.5
    # Source coordinate (in 8x8 pixel units, +1 for the pad) of each output pixel centre.
    rows = (grid[None, :] - offset[:, None] - shift[:, :1]) * (8.0 / size[:, None]) + 0.5
    cols = (grid[None, :] - offset[:, None] - shift[:, 1:]) * (8.0 / size[:, None]) + 0.5
    rows = np.clip(rows, 0.0, 9.0)
    cols = np.clip(cols, 0.0, 9.0)
    r0 = np.minimum(rows.astype(np.int64), 8)
    c0 = np.minimum(cols.astype(np.int64), 8)
    fr = (rows - r0)[:, :, None]
    fc = (cols - c0)[:, None, :]
    idx = np.arange(m)[:, None, None]
    top = (
        padded[idx, r0[:, :, None], c0[:, None, :]] * (1 - fc)
        + padded[idx, r0[:, :, None], c0[:, None, :] + 1] * fc
    )
    bottom = (
        padded[idx, r0[:, :, None] + 1, c0[:, None, :]] * (1 - fc)
        + padded[idx, r0[:, :, None] + 1, c0[:, None, :] + 1] * fc
    )
    out = top * (1 - fr) + bottom * fr
    out += rng.normal(scale=0.05, size=out.shape).astype(np.float32)
    np.clip(out, 0.0, 1.0, out=out)
    return (out - MNIST_MEAN) / MNIST_STD
