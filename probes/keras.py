"""The Keras timing hook: a callback recording the same phases as the PyTorch probe.

:class:`ProbeCallback` records wall-clock phases from Keras' own hooks: initialisation
(process start until the first train batch begins), each training iteration
(``on_train_batch_begin`` .. ``on_train_batch_end``; the first one includes tracing the train
step, which is the first-iteration outlier), and each validation pass (``on_test_begin`` ..
``on_test_end``). Add it to any ``fit`` to time a user's own Keras loop; the probe runner
(:mod:`advisor.probes.keras_runner`) uses it for built-in and user workloads.

Importing this module imports Keras: import it only where it is needed.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

import keras

ProgressFn = Callable[[str, int, int], None]  # (phase, done, total), as the PyTorch probe


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
    def steady_span_s(self) -> float:
        """Wall time from the end of the first training batch to the end of the last."""
        return self._batch_end[-1] - self._batch_end[0] if len(self._batch_end) >= 2 else 0.0

    @property
    def diverged(self) -> bool:
        return any(not math.isfinite(v) for v in self.losses)
