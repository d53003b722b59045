"""The Keras timing hook: a callback recording the same phases as the PyTorch probe.

:class:`ProbeCallback` records wall-clock phases from Keras' own hooks: initialisation
(process start until the first train batch begins), each training iteration
(``on_train_batch_begin`` .. ``on_train_batch_end``; the first one includes tracing the train
step, which is the first-iteration outlier), and each validation pass (``on_test_begin`` ..
``on_test_end``). Add it to any ``fit`` to time a user's own Keras loop; the probe runner
(:mod:`advisor.probes.keras_runner`) uses it for built-in and user workloads.

:func:`train` really trains a Keras workload with ``model.fit``, timed by the same callback.

Importing this module imports Keras: import it only where it is needed.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from typing import Any

import keras
from advisor.probes.framework import LossDiverged, ProgressFn
from advisor.probes.keras_data import as_dataset
from advisor.search_spaces.workloads.setups import KerasSetup

__all__ = ["LossDiverged", "ProbeCallback", "ProgressFn", "train"]


class ProbeCallback(keras.callbacks.Callback):
    """Records the wall-clock phases of a Keras ``fit``/``evaluate`` run.

    ``first_batch_wall`` is ``time.time()`` when the first training batch began (so the
    initialisation time can be measured from the process start). ``iteration_s`` and
    ``validation_s`` are per-batch and per-pass durations in order; ``epoch_s`` per epoch
    (train plus validation); ``cpu_s`` the process CPU time at each batch end.
    """

    def __init__(
        self,
        clock: Callable[[], float] = time.perf_counter,
        on_progress: ProgressFn | None = None,
        total: int = 0,
    ) -> None:
        super().__init__()
        self._clock = clock
        self._on_progress = on_progress
        self._total = total
        self.first_batch_wall: float | None = None
        self.first_batch_cpu: float | None = None  # time.process_time() then (issue #36)
        self._batch_begin: list[float] = []
        self._batch_end: list[float] = []
        self._test_begin: list[float] = []
        self._test_end: list[float] = []
        self._epoch_begin: list[float] = []
        self._epoch_end: list[float] = []
        self.cpu_s: list[float] = []
        self.losses: list[float] = []

    def on_train_batch_begin(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        if self.first_batch_wall is None:
            self.first_batch_wall = time.time()
            self.first_batch_cpu = time.process_time()
        self._batch_begin.append(self._clock())

    def on_train_batch_end(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        # Keras converts the logs to Python numbers before calling a callback that is not
        # async-safe, so the step has finished when this runs.
        self._batch_end.append(self._clock())
        self.cpu_s.append(time.process_time())
        if logs and "loss" in logs:
            self.losses.append(float(logs["loss"]))
        if self._on_progress is not None:
            self._on_progress("iterations", len(self._batch_end), self._total)

    def on_test_begin(self, logs: dict[str, Any] | None = None) -> None:
        self._test_begin.append(self._clock())

    def on_test_end(self, logs: dict[str, Any] | None = None) -> None:
        self._test_end.append(self._clock())

    def on_epoch_begin(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        self._epoch_begin.append(self._clock())

    def on_epoch_end(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        self._epoch_end.append(self._clock())

    @property
    def iteration_s(self) -> tuple[float, ...]:
        """Per training iteration: the first from its batch's begin to end hook, each later one
        from the previous end to its own end (so Keras' loop overhead between batches, which a
        real run pays too, is included)."""
        if not self._batch_end:
            return ()
        first = self._batch_end[0] - self._batch_begin[0]
        ends = self._batch_end
        return (first, *(ends[i] - ends[i - 1] for i in range(1, len(ends))))

    @property
    def validation_s(self) -> tuple[float, ...]:
        return tuple(e - b for b, e in zip(self._test_begin, self._test_end, strict=False))

    @property
    def epoch_s(self) -> tuple[float, ...]:
        return tuple(e - b for b, e in zip(self._epoch_begin, self._epoch_end, strict=False))

    @property
    def first_batch_perf(self) -> float | None:
        """The clock reading when the first training batch began."""
        return self._batch_begin[0] if self._batch_begin else None

    @property
    def step_ends(self) -> tuple[float, ...]:
        """The clock reading at the end of every training batch."""
        return tuple(self._batch_end)

    @property
    def steady_span_s(self) -> float:
        """Wall time from the end of the first training batch to the end of the last."""
        return self._batch_end[-1] - self._batch_end[0] if len(self._batch_end) >= 2 else 0.0

    @property
    def diverged(self) -> bool:
        return any(not math.isfinite(v) for v in self.losses)


def train(
    setup: KerasSetup,
    epochs: int,
    on_epoch: Callable[[int, dict[str, float]], None] | None = None,
    *,
    device: str = "cpu",
    patience: int | None = None,
) -> dict[str, Any]:
    """Really train ``setup`` for ``epochs`` epochs with ``model.fit`` (each epoch: all
    training batches, then one validation pass), timed by the same callback as the probe.

    Mirrors :func:`advisor.probes.torch_runner.train`: ``on_epoch(epoch, metrics)`` gets
    ``train_loss``, ``val_loss``, ``val_accuracy`` and ``epoch_s``; ``patience`` stops early
    after that many epochs without a lower validation loss. Returns ``runtime_s`` (first batch
    to the end), ``first_batch_wall``, ``epoch_s``, ``train_loss``, ``val_loss``,
    ``val_accuracy`` (per epoch), ``validation_s`` (per pass), ``first_iteration_s``,
    ``steady_iteration_s`` (median of iterations 2..), ``iterations`` and ``epochs_run``.
    ``device`` is accepted for symmetry; TensorFlow places ops itself. Raises
    :class:`LossDiverged` if the loss becomes NaN or infinite.
    """
    if epochs <= 0:
        raise ValueError(f"epochs must be > 0, but got {epochs}")
    cb = ProbeCallback()
    callbacks: list[Any] = [cb, *setup.callbacks]
    if patience is not None:
        callbacks.append(keras.callbacks.EarlyStopping(monitor="val_loss", patience=patience))

    def epoch_end(epoch: int, logs: dict[str, Any] | None) -> None:
        logs = logs or {}
        metrics = {
            "train_loss": float(logs.get("loss", float("nan"))),
            "val_loss": float(logs.get("val_loss", float("nan"))),
            "val_accuracy": float(logs.get("val_accuracy", float("nan"))),
            "epoch_s": cb.epoch_s[-1] if cb.epoch_s else float("nan"),
        }
        history.append(metrics)
        if not math.isfinite(metrics["train_loss"]):
            setup.model.stop_training = True
        if on_epoch is not None:
            on_epoch(epoch, metrics)

    history: list[dict[str, float]] = []
    # after `cb` in the list, so the epoch's duration is known when epoch_end runs
    callbacks.append(keras.callbacks.LambdaCallback(on_epoch_end=epoch_end))
    setup.model.fit(
        as_dataset(setup.train, setup.batch_size, shuffle=True),
        epochs=epochs,
        shuffle=False,  # the dataset shuffles itself
        validation_data=as_dataset(setup.val, setup.batch_size, shuffle=False),
        callbacks=callbacks,
        verbose=0,
    )
    end = time.perf_counter()
    if cb.diverged:
        raise LossDiverged(f"loss became {cb.losses[-1]}")
    iterations = cb.iteration_s
    return {
        "runtime_s": end - cb.first_batch_perf if cb.first_batch_perf is not None else 0.0,
        "first_batch_wall": cb.first_batch_wall,
        "epoch_s": list(cb.epoch_s),
        "train_loss": [m["train_loss"] for m in history],
        "val_loss": [m["val_loss"] for m in history],
        "val_accuracy": [m["val_accuracy"] for m in history],
        "validation_s": list(cb.validation_s),
        "first_iteration_s": iterations[0] if iterations else None,
        "steady_iteration_s": statistics.median(iterations[1:]) if len(iterations) > 1 else None,
        "iterations": len(iterations),
        "epochs_run": len(history),
    }
