"""The learning-rate rule across batch sizes (``advisor.prediction.run.epochs_model.LR_RULE``) as a
starting point of the search, and the check of it.

The rule scales a known-good learning rate ``lr_ref`` at ``B_ref`` to another batch size with
the noise scale: ``lr(B) = lr_ref (1 + B_noise/B_ref) / (1 + B_noise/B)`` for SGD, the square
root of that factor for adaptive optimisers. The known-good point is the workload's own recipe:
its builder's default learning rate at its default batch size (fcn: 0.1 at 256, momentum SGD;
simple-cnn: 1.0 at 256, Adadelta). ``B_noise`` is the one the report's epochs table uses (fitted
to known points, or the probe's ``B_simple``); without one the rule is linear scaling.
"""

from __future__ import annotations

import inspect
import math
from dataclasses import dataclass
from typing import Any

ADAPTIVE = ("adam", "adamw", "adadelta", "rmsprop")
AGREES_WITHIN = 2.0  # tuned/rule learning-rate ratio inside [1/2, 2]: "agrees"


@dataclass(frozen=True)
class LrRule:
    """The rule anchored at the workload's recipe (see the module docstring)."""

    lr_ref: float
    batch_ref: int
    adaptive: bool
    b_noise: float  # inf: unknown, linear scaling
    b_noise_basis: str
    optimizer: str

    def __post_init__(self) -> None:
        if not (self.lr_ref > 0 and self.batch_ref > 0 and self.b_noise > 0):
            raise ValueError(
                f"lr_ref, batch_ref and b_noise must be > 0, got {self.lr_ref}, "
                f"{self.batch_ref}, {self.b_noise}"
            )

    def lr_at(self, batch_size: int) -> float:
        """The rule's learning rate at ``batch_size``."""
        from advisor.prediction.run.epochs_model import scaled_lr

        return scaled_lr(
            self.lr_ref, self.batch_ref, batch_size, self.b_noise, adaptive=self.adaptive
        )

    @property
    def basis(self) -> str:
        noise = (
            f"B_noise {self.b_noise:,.0f} ({self.b_noise_basis})"
            if math.isfinite(self.b_noise)
            else "no B_noise known: linear scaling"
        )
        kind = "square root, adaptive" if self.adaptive else "SGD"
        return (
            f"the recipe's lr {self.lr_ref:g} at batch {self.batch_ref} ({self.optimizer}, "
            f"{kind}), {noise}"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "lr_ref": self.lr_ref,
            "batch_ref": self.batch_ref,
            "adaptive": self.adaptive,
            "b_noise": self.b_noise if math.isfinite(self.b_noise) else "inf",
            "b_noise_basis": self.b_noise_basis,
            "optimizer": self.optimizer,
            "basis": self.basis,
        }


def recipe(model: str, framework: str = "torch") -> dict[str, Any]:
    """The builder's defaults: every hyperparameter it names with its default, plus
    ``batch_size`` (empty when the builder cannot be read)."""
    from advisor.search_spaces.workloads import ModelRef, get, load_callable

    try:
        builder = load_callable(model) if ModelRef(model).is_user else get(model).builder(framework)
        params = inspect.signature(builder).parameters
    except Exception:  # a user module that does not import: the probes say why
        return {}
    return {
        name: p.default for name, p in params.items() if p.default is not inspect.Parameter.empty
    }


def lr_rule(
    model: str, b_noise: float | None, b_noise_basis: str, framework: str = "torch"
) -> LrRule | None:
    """The rule for ``model`` (None when its builder has no default ``lr`` and batch size)."""
    defaults = recipe(model, framework)
    lr, batch = defaults.get("lr"), defaults.get("batch_size")
    if not isinstance(lr, int | float) or not isinstance(batch, int) or lr <= 0 or batch <= 0:
        return None
    optimizer = str(defaults.get("optimizer", "sgd")).lower()
    noise = b_noise if b_noise is not None and b_noise > 0 else math.inf
    return LrRule(float(lr), batch, optimizer in ADAPTIVE, noise, b_noise_basis, optimizer)


def agreement(tuned_lr: float, rule_lr: float) -> dict[str, Any]:
    """How the tuned learning rate compares with the rule's: their ratio and whether it lies
    within a factor ``AGREES_WITHIN`` (learning rates are tuned on a log scale)."""
    ratio = tuned_lr / rule_lr
    agrees = 1 / AGREES_WITHIN <= ratio <= AGREES_WITHIN
    return {
        "tuned_lr": tuned_lr,
        "rule_lr": rule_lr,
        "ratio": round(ratio, 3),
        "agrees": agrees,
        "text": (
            f"tuned lr {tuned_lr:.3g} is {ratio:.2g}x the rule's {rule_lr:.3g}: "
            + ("agrees" if agrees else "disagrees")
            + f" (within {AGREES_WITHIN:g}x counts as agreeing)"
        ),
    }
