"""What the scorer knows about the workload being placed, and its epochs per batch size."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from advisor.prediction.run.epochs_fit import fit_noise_scale, fitted_epochs
from advisor.prediction.run.epochs_model import EpochsAnchor, EpochsEstimate, predict_epochs

if TYPE_CHECKING:
    from advisor.search_spaces.workloads import Workload


@dataclass(frozen=True)
class WorkloadInfo:
    """What the scorer needs to know about the workload being placed."""

    name: str
    framework: str = "torch"
    n_train: int = 0
    n_val: int = 0
    epochs: int | None = None  # the user's --epochs; None: epochs_to_stabilise per batch size
    epochs_to_stabilise: dict[int, int] = field(default_factory=dict)
    default_epochs: int = 10
    at_batch: int | None = None  # issue #19: --at-batch, the batch size --epochs was seen at
    # issue #19: --epochs-at B=N, epochs known at other batch sizes (sorted (B, N) pairs)
    epochs_at: tuple[tuple[int, int], ...] = ()
    # issue #14: bytes a cloud job downloads before training (0: unknown, term left out)
    data_bytes: float = 0.0
    data_basis: str = ""  # where that size comes from

    def __post_init__(self) -> None:
        if self.n_train <= 0:
            raise ValueError(f"n_train must be > 0, but got {self.n_train}")
        if self.n_val < 0:
            raise ValueError(f"n_val must be >= 0, but got {self.n_val}")
        if self.epochs is not None and self.epochs <= 0:
            raise ValueError(f"epochs must be > 0, but got {self.epochs}")
        if self.at_batch is not None and (self.at_batch <= 0 or self.epochs is None):
            raise ValueError(f"at_batch needs epochs and must be > 0, got {self.at_batch}")
        if not 0 <= self.data_bytes < float("inf"):
            raise ValueError(f"data_bytes must be >= 0, but got {self.data_bytes}")

    # -- issue #19: epochs per batch size from the gradient noise scale ----------------------
    def known_epochs(self) -> tuple[dict[int, float], str]:
        """The known (batch size: epochs) points and what they are: the user's (``--epochs N
        --at-batch B`` and every ``--epochs-at B=N``), else the workload's published epochs to
        stabilise; none when ``--epochs`` is one number for every batch size."""
        if self.epochs is not None and self.at_batch is None:
            return {}, f"--epochs {self.epochs}"
        given = dict(self.epochs_at)
        if self.epochs is not None and self.at_batch is not None:
            given[self.at_batch] = self.epochs
        if given:
            return {b: float(e) for b, e in given.items()}, "given epochs (--epochs-at, --at-batch)"
        published = {b: float(e) for b, e in self.epochs_to_stabilise.items()}
        return published, "published epochs to stabilise (docs/method.md 2.3)"

    def epochs_anchor(self) -> EpochsAnchor | None:
        """The known point the epochs model starts from (the smallest known batch size), or
        None when the epochs are one number for every batch size (``--epochs`` alone, or no
        known figures). With exactly one known point, its probe also measures the gradient
        noise scale."""
        known, _ = self.known_epochs()
        if not known:
            return None
        ref = min(known)
        if self.epochs is not None and self.at_batch == ref:
            basis = f"--epochs {self.epochs} --at-batch {self.at_batch}"
        elif self.epochs_at:
            basis = f"--epochs-at {ref}={known[ref]:g}"
        else:
            basis = "published epochs to stabilise (docs/method.md 2.3)"
        return EpochsAnchor(ref, known[ref], "given", basis)

    def needs_noise_scale(self) -> bool:
        """Whether the epochs model needs the probe's noise scale: exactly one known point."""
        return len(self.known_epochs()[0]) == 1

    def epochs_estimate(self, batch_size: int, noise: Any = None) -> EpochsEstimate:
        """Epochs at ``batch_size`` from the model ``E(B) = E_min (1 + B/B_noise)``: with two
        or more known points ``B_noise`` is fitted to them (:mod:`advisor.prediction.run.epochs_fit`);
        with one, it is the probe's ``noise`` (:class:`advisor.probes.gradient_noise.
        NoiseScale`); with none, the single given number."""
        known, basis = self.known_epochs()
        if len(known) >= 2:
            # The probe's noise scale, measured at the start of training, is far below the
            # one that sets the epochs and varies widely across seeds (fcn: 49-10,257 over 10
            # seeds after 8 steps; docs/benchmarks.md, issue #19): known points fit better.
            return fitted_epochs(fit_noise_scale(known), batch_size, basis)
        anchor = self.epochs_anchor()
        if anchor is not None:
            return predict_epochs(anchor, batch_size, noise)
        e = self.epochs_for(batch_size)
        basis = f"--epochs {e}" if self.epochs is not None else "the workload's default"
        return EpochsEstimate(batch_size, e, e, e, e, "given", f"{basis}, every batch size")

    def epochs_for(self, batch_size: int) -> int:
        """The run length: --epochs, else the known epochs-to-stabilise (nearest batch size)."""
        if self.epochs is not None:
            return self.epochs
        known = self.epochs_to_stabilise
        if not known:
            return self.default_epochs
        if batch_size in known:
            return known[batch_size]
        return known[min(known, key=lambda b: abs(b - batch_size))]


def default_epochs(workload: Workload, batch_size: int) -> int:
    """A built-in workload's whole epochs at ``batch_size``, as ``advisor suggest`` counts them
    (:meth:`WorkloadInfo.epochs_estimate` on its published figures): for ``advisor predict``,
    ``estimate`` and the tuning job's fixed ``epochs``."""
    info = WorkloadInfo(
        name=workload.name,
        n_train=workload.n_train,
        n_val=workload.n_val,
        epochs_to_stabilise=dict(workload.epochs_to_stabilise),
        default_epochs=workload.default_epochs,
    )
    return info.epochs_estimate(batch_size).epochs
