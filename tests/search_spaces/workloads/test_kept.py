"""Small generated data sets are kept per arguments, as copies (workloads/kept.py)."""

from __future__ import annotations

import numpy as np
from advisor.search_spaces.workloads.kept import keep_small
from advisor.search_spaces.workloads.seismic import seismic_patches


def test_small_sets_come_from_the_cache_as_fresh_copies() -> None:
    calls: list[int] = []

    @keep_small(10)
    def make(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
        calls.append(n)
        return np.full(n, seed, dtype=np.float32), np.arange(n)

    a, _ = make(5, seed=1)
    a[:] = -1  # a caller changing its copy
    b, _ = make(5, seed=1)
    assert calls == [5] and (b == 1).all()
    make(5, seed=2)
    make(50)  # above the limit: generated every time
    make(50)
    assert calls == [5, 5, 50, 50]


def test_the_generators_give_the_same_data_kept_or_not() -> None:
    x1, y1 = seismic_patches(8, seed=3)
    x2, y2 = seismic_patches(8, seed=3)
    assert x1 is not x2 and np.array_equal(x1, x2) and np.array_equal(y1, y2)
