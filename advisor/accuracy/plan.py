"""What ``--tune TIME`` buys on this machine: the short runs' data, length and batch sizes.

A short run trains ``n_train`` samples (a subset of the workload's training set) for up to
``epochs`` epochs, checked ``checks_per_epoch`` times per epoch on ``n_val`` validation
samples, at the recommended batch size or one of its neighbours in the space. The plan is
sized from this machine's measured cost per sample (the study's local probe at the
recommended batch size: its steady iteration time and validation pass) so that one
full-length short run takes at most ``RUN_SHARE`` of ``TIME``: the pruner (Hyperband's
brackets of successive halving) then sees many configurations at the early checks and lets
few run to the end, and the seeds of the best
fit in what is left. Every batch size gets at least one optimizer step per check; a
neighbour that cannot is left out, and a ``TIME`` too short for the recommended batch size is
refused with the smallest ``--tune`` that works. A dataset too small for the recommended batch
size to have a step per check (issue #50: a user model's 1,437 samples at batch 2048) is tuned
at the largest batch size of the space it allows (``judged_batch``), the left-out sizes named.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import asdict, dataclass, field
from typing import Any

from advisor.durations import format_duration
from advisor.errors import AdvisorError

CHECKS_PER_EPOCH = 4
MAX_EPOCHS = 4  # the longest short run, in epochs of its subset
REDUCTION_FACTOR = 3  # each successive-halving rung keeps the best third
RUN_SHARE = 1 / 6  # a full-length short run may take this share of --tune
TRAIN_SHARE = 0.8  # of a run's time, training (the rest: validation passes, building)
MIN_VAL = 256
REPLICATES = 2  # extra seeds of the best configuration, when time is left
PRUNERS = ("successive-halving", "hyperband")


@dataclass(frozen=True)
class TunePlan:
    """The short runs of one study's ``--tune`` (see the module docstring)."""

    workload: str
    batch_sizes: tuple[int, ...]
    recommended_batch: int
    n_train: int
    n_val: int
    epochs: int
    full_n_train: int
    checks_per_epoch: int = CHECKS_PER_EPOCH
    reduction_factor: int = REDUCTION_FACTOR
    pruner: str = "hyperband"
    replicates: int = REPLICATES
    estimated_run_s: float = 0.0  # a full-length short run, from the measured cost per sample
    basis: str = ""  # where that cost came from
    left_out: tuple[str, ...] = field(default_factory=tuple)  # batch sizes left out, and why
    # The space's batch sizes, in its order: the study's ``batch_size`` distribution, which a
    # storage requires every trial to share (default: ``batch_sizes``).
    batch_choices: tuple[int, ...] = ()
    # Issue #50: the batch size the runs centre on when the dataset is too small for the
    # recommended one (0: the recommended one)
    judged_batch: int = 0

    def __post_init__(self) -> None:
        if self.centre not in self.batch_sizes:
            raise ValueError(f"the batch {self.centre} judged must be among {self.batch_sizes}")
        if min(self.n_train, self.n_val, self.epochs, self.checks_per_epoch) <= 0:
            raise ValueError("n_train, n_val, epochs and checks_per_epoch must be > 0")
        if math.ceil(self.n_train / max(self.batch_sizes)) < self.checks_per_epoch:
            raise ValueError(
                f"{self.n_train} samples give batch {max(self.batch_sizes)} fewer steps than "
                f"the {self.checks_per_epoch} checks of an epoch"
            )
        if self.batch_choices and not set(self.batch_sizes) <= set(self.batch_choices):
            raise ValueError(f"{self.batch_sizes} must be among {self.batch_choices}")
        if self.pruner not in PRUNERS:
            raise ValueError(f"pruner must be one of {PRUNERS}, but got {self.pruner!r}")
        if self.reduction_factor < 2:
            raise ValueError(f"reduction_factor must be >= 2, got {self.reduction_factor}")

    @property
    def centre(self) -> int:
        """The batch size the runs centre on: the recommended one, unless the dataset is too
        small for it (``judged_batch``)."""
        return self.judged_batch or self.recommended_batch

    def turns(self) -> list[int]:
        """The order in which the batch sizes get a run: the one judged every other turn.

        >>> TunePlan("fcn", (256, 512, 1024), 512, 4096, 212, 1, 40512).turns()
        [512, 256, 512, 1024]
        """
        others = [b for b in self.batch_sizes if b != self.centre]
        if not others:
            return [self.centre]
        return [b for other in others for b in (self.centre, other)]

    @property
    def study_batch_choices(self) -> tuple[int, ...]:
        """The choices of the study's ``batch_size`` distribution."""
        return self.batch_choices or self.batch_sizes

    @property
    def checks(self) -> int:
        """Checks in a full-length short run (the pruner's largest step)."""
        return self.epochs * self.checks_per_epoch

    @property
    def id(self) -> str:
        """A short hash of what makes two short runs comparable (data, length, checks)."""
        key = [
            self.workload, list(self.batch_sizes), self.n_train, self.n_val, self.epochs,
            self.checks_per_epoch, self.reduction_factor, self.pruner,
        ]  # fmt: skip
        return hashlib.sha1(json.dumps(key).encode()).hexdigest()[:8]

    @property
    def length_text(self) -> str:
        """'3 epochs of a 4,096-sample subset (of 40,512)'."""
        subset = (
            f"a {self.n_train:,}-sample subset (of {self.full_n_train:,})"
            if self.n_train < self.full_n_train
            else f"all {self.n_train:,} samples"
        )
        return f"{self.epochs} epoch{'s' * (self.epochs != 1)} of {subset}"

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["batch_sizes"] = list(self.batch_sizes)
        out["left_out"] = list(self.left_out)
        out["batch_choices"] = list(self.batch_choices)
        out["id"] = self.id
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TunePlan:
        fields = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        fields["batch_sizes"] = tuple(int(b) for b in fields["batch_sizes"])
        fields["left_out"] = tuple(fields.get("left_out") or ())
        fields["batch_choices"] = tuple(int(b) for b in fields.get("batch_choices") or ())
        return cls(**fields)


@dataclass(frozen=True)
class SampleCost:
    """Seconds per training sample and per validation sample on this machine, and how known."""

    train_s: float
    val_s: float
    basis: str

    def __post_init__(self) -> None:
        if not (self.train_s > 0 and self.val_s > 0):
            raise ValueError(f"costs per sample must be > 0, got {self.train_s}, {self.val_s}")


def neighbours(batch: int, batch_sizes: list[int] | tuple[int, ...]) -> list[int]:
    """``batch`` and the batch sizes next to it in the space (sorted)."""
    sizes = sorted(set(batch_sizes) | {batch})
    i = sizes.index(batch)
    return sizes[max(0, i - 1) : i + 2]


def plan_tuning(
    budget_s: float,
    workload: str,
    recommended_batch: int,
    batch_sizes: list[int] | tuple[int, ...],
    n_train: int,
    n_val: int,
    cost: SampleCost,
    pruner: str = "hyperband",
) -> TunePlan:
    """The short runs ``budget_s`` seconds buy (see the module docstring); AdvisorError when
    not even the recommended batch size gets one epoch with a step per check."""
    run_s = budget_s * RUN_SHARE
    afford = TRAIN_SHARE * run_s / cost.train_s  # training samples of a full-length run
    centre, batches, left_out = _dataset_allows(recommended_batch, batch_sizes, n_train)
    while max(batches) != centre:
        n_min = CHECKS_PER_EPOCH * max(batches)
        if afford >= n_min:
            break
        dropped = max(batches)
        batches.remove(dropped)
        left_out.append(
            f"batch {dropped}: one epoch with a step per check needs {n_min:,} samples, more "
            f"than a short run affords in {format_duration(run_s)}"
        )
    n_min = CHECKS_PER_EPOCH * max(batches)
    if afford < n_min:
        need = n_min * cost.train_s / (TRAIN_SHARE * RUN_SHARE)
        raise AdvisorError(
            f"--tune {format_duration(budget_s)} is too short for batch {centre} "
            f"here: one epoch of {n_min:,} samples takes about {format_duration(need * RUN_SHARE)} "
            f"of this machine, and a short run may use a sixth of --tune.",
            f"give at least --tune {format_duration(60 * math.ceil(need / 60))}.",
        )
    n = int(min(n_train, max(n_min, afford // MAX_EPOCHS)))
    epochs = int(max(1, min(MAX_EPOCHS, afford // n)))
    val = int(min(n_val, max(MIN_VAL, n // 4))) if n_val > 0 else 0
    if val <= 0:
        raise AdvisorError(
            "--tune judges hyperparameters on validation data, and the workload has none.",
            "pass --n-val N (validation samples), or leave --tune out.",
        )
    estimate = epochs * (n * cost.train_s + CHECKS_PER_EPOCH * val * cost.val_s)
    return TunePlan(
        workload=workload,
        batch_sizes=tuple(batches),
        recommended_batch=recommended_batch,
        n_train=n,
        n_val=val,
        epochs=epochs,
        full_n_train=n_train,
        pruner=pruner,
        estimated_run_s=round(estimate, 3),
        basis=cost.basis,
        left_out=tuple(left_out),
        batch_choices=tuple(batch_sizes),
        judged_batch=0 if centre == recommended_batch else centre,
    )


def _dataset_allows(
    recommended: int, batch_sizes: list[int] | tuple[int, ...], n_train: int
) -> tuple[int, list[int], list[str]]:
    """The batch size to centre on, its neighbours and the sizes left out with why: a size
    whose epoch of ``n_train`` samples has fewer steps than checks is left out; when that is
    the recommended one, the largest the dataset allows below it is judged instead (issue
    #50: refusing left the user a fix they could not apply, a larger dataset)."""
    sizes = sorted(set(batch_sizes) | {recommended})
    allowed = [b for b in sizes if CHECKS_PER_EPOCH * b <= n_train]

    def why(b: int) -> str:
        return (
            f"batch {b}: one epoch with a step per check ({CHECKS_PER_EPOCH} checks) needs "
            f"{CHECKS_PER_EPOCH * b:,} training samples, the dataset has {n_train:,}"
        )

    if recommended in allowed:
        batches = neighbours(recommended, sizes)
        return (
            recommended,
            [b for b in batches if b in allowed],
            [why(b) for b in batches if b not in allowed],
        )
    if not allowed:
        raise AdvisorError(
            f"--tune needs at least {CHECKS_PER_EPOCH * sizes[0]:,} training samples at the "
            f"space's smallest batch size, {sizes[0]} ({CHECKS_PER_EPOCH} checks per epoch), "
            f"and the dataset has {n_train:,}.",
            f"add a batch size of at most {n_train // CHECKS_PER_EPOCH} to the space (--space), "
            "or leave --tune out.",
        )
    centre = allowed[-1]  # the largest the dataset allows (all of them below the recommended)
    judged = (
        f"{why(recommended)}: the recommended batch size; the runs judge batch {centre}, the "
        "largest the dataset allows"
    )
    left = [
        why(b)
        for b in sizes
        if b not in allowed and b != recommended and b in neighbours(recommended, sizes)
    ]
    return centre, neighbours(centre, allowed), [judged, *left]
