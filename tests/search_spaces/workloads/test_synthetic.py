"""The generated stand-ins for CIFAR-10 / X-ray images and Penn Treebank tokens."""

from __future__ import annotations

import numpy as np
import pytest
from advisor.search_spaces.workloads.synthetic import class_images, to_channels_first, zipf_tokens


def test_class_images_shapes_types_and_seed() -> None:
    x, y = class_images(50, 32, 32, 3, 10, seed=1)
    assert x.shape == (50, 32, 32, 3) and x.dtype == np.float32
    assert y.shape == (50,) and y.dtype == np.int64 and set(y) <= set(range(10))
    x2, y2 = class_images(50, 32, 32, 3, 10, seed=1)
    np.testing.assert_array_equal(x, x2)
    np.testing.assert_array_equal(y, y2)
    assert not np.array_equal(x, class_images(50, 32, 32, 3, 10, seed=2)[0])
    assert to_channels_first(x).shape == (50, 3, 32, 32)


def test_class_images_are_learnable_across_seeds() -> None:
    """A nearest-class-mean classifier fit on one seed beats chance by far on another."""
    x, y = class_images(400, 16, 16, 3, 10, seed=0)
    vx, vy = class_images(200, 16, 16, 3, 10, seed=1)
    means = np.stack([x[y == c].mean(axis=0).ravel() for c in range(10)])
    distances = ((vx.reshape(len(vx), -1)[:, None, :] - means[None]) ** 2).sum(-1)
    accuracy = float((distances.argmin(1) == vy).mean())
    assert accuracy > 0.5  # chance is 0.1


def test_zipf_tokens_targets_are_next_tokens() -> None:
    x, y = zipf_tokens(30, 35, 10_000, seed=0)
    assert x.shape == y.shape == (30, 35)
    np.testing.assert_array_equal(x[:, 1:], y[:, :-1])
    assert x.min() >= 0 and x.max() < 10_000


def test_zipf_tokens_are_zipfian_and_predictable() -> None:
    x, y = zipf_tokens(2_000, 35, 10_000, seed=0, follow=0.5)
    counts = np.bincount(x.ravel(), minlength=10_000)
    assert counts[0] > counts[10] > counts[1_000]  # frequency falls with rank
    # each token's most common next token predicts at least the `follow` share of pairs,
    # where predicting the most frequent token alone would do far worse
    pairs, pair_counts = np.unique(x.ravel() * 10_000 + y.ravel(), return_counts=True)
    best: dict[int, int] = {}
    for pair, count in zip(pairs // 10_000, pair_counts, strict=True):
        best[int(pair)] = max(best.get(int(pair), 0), int(count))
    explained = sum(best.values()) / x.size
    assert explained > 0.5 > counts.max() / x.size


@pytest.mark.parametrize(
    "kwargs",
    [{"n": -1}, {"n_classes": 1}, {"height": 0}],
)
def test_class_images_rejects_bad_sizes(kwargs: dict[str, int]) -> None:
    args = {"n": 4, "height": 8, "width": 8, "channels": 1, "n_classes": 2} | kwargs
    with pytest.raises(ValueError, match="but got"):
        class_images(**args)


def test_zipf_tokens_rejects_bad_follow() -> None:
    with pytest.raises(ValueError, match=r"follow=1\.5"):
        zipf_tokens(2, 5, 100, follow=1.5)
