"""The Keras input pipeline: every sample once per epoch, reshuffled, autotuning off."""

from __future__ import annotations

import numpy as np
import pytest

pytestmark = pytest.mark.slow  # imports TensorFlow (about 5 s)


def _epoch(dataset) -> tuple[list[int], list[int]]:
    sizes, ids = [], []
    for x, y in dataset:
        sizes.append(int(y.shape[0]))
        ids.extend(int(v) for v in np.asarray(x["id"]).ravel())
        assert np.array_equal(np.asarray(x["id"]).ravel() % 3, np.asarray(y))  # rows stay paired
    return sizes, ids


def test_each_epoch_gives_every_sample_once_in_a_new_order() -> None:
    import tensorflow as tf
    from advisor.probes.keras_data import as_dataset

    tf.random.set_seed(0)
    ids = np.arange(100)
    x = {"id": ids.reshape(100, 1), "other": np.zeros((100, 4), np.float32)}
    dataset = as_dataset((x, ids % 3), 32, shuffle=True)
    sizes, first = _epoch(dataset)
    _, second = _epoch(dataset)
    assert sizes == [32, 32, 32, 4]
    assert sorted(first) == sorted(second) == list(range(100))
    assert first != second and first != list(range(100))
    assert dataset.options().autotune.enabled is False


def test_validation_order_is_kept_and_datasets_pass_through() -> None:
    import tensorflow as tf
    from advisor.probes.keras_data import as_dataset

    ids = np.arange(10)
    _, order = _epoch(as_dataset(({"id": ids}, ids % 3), 4, shuffle=False))
    assert order == list(range(10))
    users = tf.data.Dataset.from_tensor_slices((ids, ids)).batch(5)
    assert as_dataset(users, 4, shuffle=True) is users
    with pytest.raises(ValueError, match=r"\(x, y\)"):
        as_dataset((ids, ids, ids), 4, shuffle=True)
