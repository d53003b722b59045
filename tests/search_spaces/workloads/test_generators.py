"""The synthetic seismic patches and the resized real digits: shapes, seeds, balance."""

from __future__ import annotations

import numpy as np
import pytest
from advisor.search_spaces.workloads.digits import digit_images
from advisor.search_spaces.workloads.seismic import seismic_patches


def test_seismic_shapes_dtype_and_exact_balance() -> None:
    x, y = seismic_patches(101, side=64, seed=3)
    assert x.shape == (101, 1, 64, 64) and x.dtype == np.float32
    assert y.dtype == np.int64 and set(np.unique(y)) == {0, 1}
    assert int(y.sum()) == 50  # half (rounded down) are positives
    assert np.allclose(x.mean(axis=(1, 2, 3)), 0, atol=1e-4)
    assert np.allclose(x.std(axis=(1, 2, 3)), 1, atol=1e-3)


def test_seismic_is_deterministic_by_seed_and_any_size() -> None:
    a = seismic_patches(20, side=32, seed=1)
    b = seismic_patches(20, side=32, seed=1)
    c = seismic_patches(20, side=32, seed=2)
    assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])
    assert not np.array_equal(a[0], c[0])
    assert seismic_patches(0)[0].shape == (0, 1, 64, 64)
    with pytest.raises(ValueError, match="side=8"):
        seismic_patches(4, side=8)


def test_seismic_positives_have_more_energy_at_the_centre() -> None:
    # The apex of a centred hyperbola puts a wavelet at the centre: on average the centre
    # pixels of positives are brighter (in absolute value) than those of negatives.
    x, y = seismic_patches(2000, seed=5, noise=0.3)
    centre = np.abs(x[:, 0, 30:34, 30:34]).mean(axis=(1, 2))
    assert centre[y == 1].mean() > 1.3 * centre[y == 0].mean()


def test_digits_shapes_labels_determinism() -> None:
    x, y = digit_images(300, seed=0)
    assert x.shape == (300, 1, 28, 28) and x.dtype == np.float32
    assert y.min() >= 0 and y.max() <= 9
    counts = np.bincount(y, minlength=10)
    assert counts.min() > 10  # every class present, roughly balanced (30 expected each)
    x2, y2 = digit_images(300, seed=0)
    assert np.array_equal(x, x2) and np.array_equal(y, y2)
    assert not np.array_equal(x, digit_images(300, seed=1)[0])
    # standardised like MNIST: background (0) maps to -mean/std
    assert x.min() == pytest.approx(-0.1307 / 0.3081, abs=1e-5)


def test_digits_train_and_val_come_from_different_source_images() -> None:
    from advisor.search_spaces.workloads import digits

    images, _ = digits._source()
    assert images.shape == (1797, 8, 8)  # the real scikit-learn digits
    with pytest.raises(ValueError, match="subset"):
        digit_images(3, subset="test")
