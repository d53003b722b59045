"""What a short training run is asked and what it reports (no framework imported here).

``advisor.probes.accuracy.short_run`` trains one (PyTorch); the short-run search of
``advisor suggest --tune`` builds requests and reads results without importing torch.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class ShortRunRequest:
    """One short run: workload, batch size, hyperparameters, data sizes, seed and length."""

    workload: str
    batch_size: int
    hyperparameters: dict[str, Any]
    n_train: int
    n_val: int
    epochs: int
    checks_per_epoch: int = 4
    seed: int = 0
    threads: int | None = None

    def __post_init__(self) -> None:
        if self.batch_size <= 0 or self.n_train <= 0 or self.n_val <= 0:
            raise ValueError(
                f"batch_size, n_train and n_val must be > 0, but got {self.batch_size}, "
                f"{self.n_train}, {self.n_val}"
            )
        if self.epochs <= 0 or self.checks_per_epoch <= 0:
            raise ValueError(
                f"epochs and checks_per_epoch must be > 0, but got {self.epochs}, "
                f"{self.checks_per_epoch}"
            )

    @property
    def checks(self) -> int:
        """Checks in a full-length run."""
        return self.epochs * self.checks_per_epoch


@dataclass(frozen=True)
class Check:
    """One validation pass: its index (1-based), epochs done, the metric and the time spent."""

    index: int
    epochs: float
    metric: str  # "val_accuracy" or "val_loss"
    value: float
    val_loss: float
    elapsed_s: float  # since the run started, building the setup included


@dataclass
class ShortRunResult:
    """What a short run did: its checks, why it ended, and where its time went."""

    checks: list[Check] = field(default_factory=list)
    ended: str = "finished"  # finished | stopped (on_check said so) | failed
    error: str | None = None
    build_s: float = 0.0
    wall_s: float = 0.0
    steps: int = 0

    @property
    def last(self) -> Check | None:
        return self.checks[-1] if self.checks else None


def check_steps(steps_per_epoch: int, checks_per_epoch: int) -> list[int]:
    """The steps of an epoch (1-based) after which a check runs; the last is the epoch's end.

    >>> check_steps(8, 4)
    [2, 4, 6, 8]
    """
    if steps_per_epoch < checks_per_epoch:
        raise ValueError(f"{steps_per_epoch} steps per epoch cannot hold {checks_per_epoch} checks")
    return [round(k * steps_per_epoch / checks_per_epoch) for k in range(1, checks_per_epoch + 1)]
