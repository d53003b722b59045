"""The input pipeline the Keras probe and the Keras training run feed to ``fit``/``evaluate``.

Given NumPy ``(x, y)``, Keras 3 (TensorFlow backend) builds a tf.data pipeline of its own with
tf.data autotuning on, and ``fit`` makes a fresh iterator of it at the end of every epoch and
throws that one away at the start of the next. Tearing down the thrown-away iterator waits
for its autotuning thread, and on this 2-core CPU that stalled every epoch after the first by
about one iteration per batch (fcn, batch 128: 2.0 s at 10,240 samples, 8.5-9.4 s at 40,960,
17.7 s at 81,920, on epochs of 3.5, 11.5 and 23.7 s). A probe of a few iterations cannot see
that stall, and it is waste in a real run. :func:`as_dataset` builds the same kind of
pipeline (whole arrays as one tensor, a shuffled index per epoch, batches gathered by index)
with autotuning off, which removes the stall (measured: 0.01 s at 40,960).
"""

from __future__ import annotations

from typing import Any

from advisor.search_spaces.workloads.setups import sample_count


def as_dataset(data: Any, batch_size: int, *, shuffle: bool) -> Any:
    """``data`` as a batched ``tf.data.Dataset``: NumPy ``(x, y)`` through
    :func:`array_dataset`; a ``tf.data.Dataset`` (the user's pipeline) or None (no
    validation data) is returned as it is."""
    if data is None or not isinstance(data, tuple | list):
        return data
    if len(data) != 2:
        raise ValueError(f"data must be (x, y), but got a sequence of {len(data)}")
    return array_dataset(data[0], data[1], batch_size, shuffle=shuffle)


def array_dataset(x: Any, y: Any, batch_size: int, *, shuffle: bool) -> Any:
    """Batches of ``(x, y)`` (arrays or nested structures of arrays with one first axis),
    reshuffled every epoch when ``shuffle``, with tf.data autotuning off (see the module
    docstring). The order follows TensorFlow's global seed (``keras.utils.set_random_seed``).
    """
    import tensorflow as tf

    n = sample_count(x)
    whole = tf.data.Dataset.from_tensors((x, y)).repeat()
    order = tf.data.Dataset.range(n)
    if shuffle:
        order = order.shuffle(n, reshuffle_each_iteration=True)

    def gather(index: Any, arrays: Any) -> Any:
        return tf.nest.map_structure(lambda a: tf.gather(a, index), arrays)

    batches = tf.data.Dataset.zip((order.batch(batch_size), whole))
    batches = batches.map(gather, num_parallel_calls=tf.data.AUTOTUNE).prefetch(2)
    options = tf.data.Options()
    options.autotune.enabled = False
    # as Keras does: no graph rewrites, which copy the whole-array tensor into every new
    # iterator (measured: 2.2 s per iterator at 76,288 fcn samples, 0.01 s without)
    options.experimental_optimization.apply_default_optimizations = False
    return batches.with_options(options)
