"""Synthetic seismic patches for the `fcn` workload: is a diffraction apex at the centre?

A patch is ``side x side`` pixels, rows are two-way time and columns are trace position.
Each patch holds coloured noise plus one to three diffraction hyperbolas

    t(x) = t_apex - d + sqrt(d**2 + ((x - x_apex) / v)**2)

(a point diffractor at depth ``d`` below the window top, seen with velocity ``v``), each drawn
as a Ricker wavelet of peak frequency ``f`` along its curve, with amplitude decaying away from
the apex (geometric spreading). Label 1 iff one apex lies within ``CENTRE_TOLERANCE`` pixels of
the patch centre; the other hyperbolas (distractors, in both classes) have their apex at least
``DISTRACTOR_MIN_OFFSET`` pixels away from it, so their flanks may still cross the centre and
the task needs the apex shape, not mere energy. Fully vectorised numpy, seeded, any size;
classes are balanced exactly (half and half, shuffled).
"""

from __future__ import annotations

import numpy as np
from advisor.search_spaces.workloads.kept import keep_small

CENTRE_TOLERANCE = 1.5  # pixels: an apex this close to the centre counts as "at the centre"
DISTRACTOR_MIN_OFFSET = 7.0  # pixels: distractor apexes are at least this far from the centre
MAX_HYPERBOLAS = 3
_CHUNK = 64  # patches generated at once (bounds temporary memory: chunk x 3 x side x side)


@keep_small(8192)  # --tune's short runs rebuild on the same data (64 MiB at 4,096)
def seismic_patches(
    n: int, side: int = 64, seed: int = 0, noise: float = 0.6
) -> tuple[np.ndarray, np.ndarray]:
    """Return ``(x, y)``: ``n`` patches as float32 ``(n, 1, side, side)`` (zero mean, unit
    variance per patch) and int64 labels (1 = diffraction apex at the centre)."""
    if n < 0 or side < 16 or noise < 0:
        raise ValueError(
            f"need n >= 0, side >= 16 and noise >= 0, but got n={n}, side={side}, noise={noise}"
        )
    rng = np.random.default_rng(seed)
    y = np.zeros(n, dtype=np.int64)
    y[: n // 2] = 1
    rng.shuffle(y)
    x = np.empty((n, 1, side, side), dtype=np.float32)
    for start in range(0, n, _CHUNK):
        stop = min(n, start + _CHUNK)
        x[start:stop, 0] = _chunk(y[start:stop], side, noise, rng)
    return x, y


def _chunk(labels: np.ndarray, side: int, noise: float, rng: np.random.Generator) -> np.ndarray:
    m = len(labels)
    h = MAX_HYPERBOLAS
    centre = (side - 1) / 2.0
    # Apex positions: slot 0 is the centred apex for positives; every other slot is a distractor.
    radius = rng.uniform(DISTRACTOR_MIN_OFFSET, side / 2.0, size=(m, h))
    angle = rng.uniform(0.0, 2 * np.pi, size=(m, h))
    apex_t = centre + radius * np.sin(angle)
    apex_x = centre + radius * np.cos(angle)
    near = rng.uniform(-CENTRE_TOLERANCE, CENTRE_TOLERANCE, size=(m, 2))
    positive = labels == 1
    apex_t[positive, 0] = centre + near[positive, 0]
    apex_x[positive, 0] = centre + near[positive, 1]
    # Positives: the centred one plus 0-2 distractors; negatives: 1-3 distractors.
    count = rng.integers(1, h + 1, size=m)
    active = np.arange(h)[None, :] < count[:, None]
    depth = rng.uniform(4.0, 40.0, size=(m, h, 1))
    velocity = rng.uniform(0.6, 1.8, size=(m, h, 1))
    freq = rng.uniform(0.07, 0.14, size=(m, h, 1, 1))  # cycles per pixel
    amp = rng.uniform(0.7, 1.3, size=(m, h, 1)) * rng.choice([-1.0, 1.0], size=(m, h, 1))

    cols = np.arange(side, dtype=np.float64)[None, None, :]
    dx = (cols - apex_x[:, :, None]) / velocity
    t_curve = apex_t[:, :, None] - depth + np.sqrt(depth**2 + dx**2)  # (m, h, side)
    spreading = amp * (depth / np.sqrt(depth**2 + dx**2)) ** 1.5  # amplitude along the curve
    # Render only the active hyperbolas (row-major, so each patch's slots are contiguous),
    # then add each patch's slots (every patch has at least one).
    rows = np.arange(side, dtype=np.float32)[None, :, None]
    t_act = t_curve[active].astype(np.float32)[:, None, :]  # (k, 1, side_x)
    w_act = (np.pi * freq[:, :, 0, 0][active]).astype(np.float32)[:, None, None]
    tau = (rows - t_act) * w_act  # (k, side_t, side_x)
    tau *= tau
    ricker = (1.0 - 2.0 * tau) * np.exp(-tau)
    ricker *= spreading[active].astype(np.float32)[:, None, :]
    signal = np.zeros((m, side, side), dtype=np.float32)
    owner = np.nonzero(active)[0]  # the patch of each rendered hyperbola, ascending
    first = np.concatenate(([True], owner[1:] != owner[:-1]))
    signal[owner[first]] = ricker[first]
    rest = np.nonzero(~first)[0]
    for _ in range(MAX_HYPERBOLAS - 1):  # add the 2nd, then 3rd, slot of each patch
        if len(rest) == 0:
            break
        head = np.concatenate(([True], owner[rest][1:] != owner[rest][:-1]))
        signal[owner[rest[head]]] += ricker[rest[head]]
        rest = rest[~head]

    white = rng.standard_normal(size=(m, side + 4, side), dtype=np.float32)
    # Noise coloured along time (a short triangular filter), as band-limited seismic noise.
    coloured = white[:, :-4] + 2 * white[:, 1:-3] + 3 * white[:, 2:-2] + 2 * white[:, 3:-1]
    coloured += white[:, 4:]
    patch = signal + (noise / 4.36) * coloured
    patch -= patch.mean(axis=(1, 2), keepdims=True)
    patch /= patch.std(axis=(1, 2), keepdims=True) + 1e-8
    return patch.astype(np.float32)
