"""The DataLoader's time per batch is read in its steady state (issue #28)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from advisor.probes import torch_loop  # noqa: E402

from advisor.prediction.step import loader  # noqa: E402


class _Loader:
    """Yields ``n`` batches per pass; the first ``cold`` batches of the process are slow."""

    def __init__(self, n: int, cold: int, clock: list[float]) -> None:
        self.n, self.cold, self.clock, self.served = n, cold, clock, 0
        self.dataset = list(range(4 * n))

    def __iter__(self) -> Iterator[tuple[Any, Any]]:
        for _ in range(self.n):
            self.served += 1
            self.clock[0] += 0.010 if self.served <= self.cold else 0.002
            yield torch.zeros(4, 3), torch.zeros(4)

    def __len__(self) -> int:
        return self.n


def _timing(monkeypatch: pytest.MonkeyPatch, passes: int) -> tuple[Any, int]:
    clock = [0.0]
    fake = _Loader(n=5, cold=5, clock=clock)  # the whole first pass faults in fresh pages

    class Setup:
        train_loader = fake
        val_loader = None

    monkeypatch.setattr(torch_loop, "build_setup", lambda *a, **k: (Setup(), None, None))
    monkeypatch.setattr(torch_loop.time, "process_time", lambda: clock[0])
    return loader.time_loader("fcn", 4, batches=5, passes=passes), fake.served


def test_the_fastest_batch_of_several_passes_counts(monkeypatch: pytest.MonkeyPatch) -> None:
    timing, served = _timing(monkeypatch, passes=3)
    assert served == 15
    assert timing.data_s == pytest.approx(0.002)
    assert timing.input_bytes_per_sample == 3 * 4  # three float32 inputs a sample
    one_pass, _ = _timing(monkeypatch, passes=1)
    assert one_pass.data_s == pytest.approx(0.010)  # what a single pass read: the cold batches
