"""What each built-in workload's builder accepts for its hyperparameters.

A space file may only search values the builder takes: a dropout of 2.55, a negative learning
rate or an unknown optimizer would otherwise be screened, searched and even recommended, and
fail only when the training is built. The declarations mirror the builders' own checks
(``_recipes._check``, ``fcn_torch``, ``simple_cnn_torch``) and the frameworks' limits (a
dropout rate in [0, 1)). Names a workload does not declare are not checked here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from advisor.search_spaces.workloads._recipes import OPTIMIZERS


@dataclass(frozen=True)
class Accepts:
    """The values a builder takes for one hyperparameter: a numeric range or a set of choices."""

    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    integer: bool = False
    choices: tuple[str, ...] | None = None

    def describe(self) -> str:
        if self.choices is not None:
            return f"one of {', '.join(self.choices)}"
        lo = "" if self.low is None else f"{'>' if self.low_open else '>='} {self.low:g}"
        hi = "" if self.high is None else f"{'<' if self.high_open else '<='} {self.high:g}"
        kind = "an integer" if self.integer else "a number"
        return f"{kind} {' and '.join(p for p in (lo, hi) if p)}".strip()

    def takes(self, value: Any) -> bool:
        """Whether the builder takes ``value``."""
        if self.choices is not None:
            return isinstance(value, str) and value.lower() in self.choices
        if isinstance(value, bool) or not isinstance(value, int | float):
            return False
        if not math.isfinite(value) or (self.integer and value != int(value)):
            return False
        if self.low is not None and (value < self.low or (self.low_open and value == self.low)):
            return False
        return not (
            self.high is not None and (value > self.high or (self.high_open and value == self.high))
        )


_OPTIMIZER = {
    "lr": Accepts(low=0.0, low_open=True),
    "momentum": Accepts(low=0.0, high=1.0, high_open=True),
    "weight_decay": Accepts(low=0.0),
    "optimizer": Accepts(choices=OPTIMIZERS),
}
_DROPOUT = {"dropout": Accepts(low=0.0, high=1.0, high_open=True)}

ACCEPTED: dict[str, dict[str, Accepts]] = {
    "fcn": {**_OPTIMIZER, **_DROPOUT},
    # the head uses 2 x dropout, so the builder takes dropout < 0.5 (simple_cnn_torch)
    "simple-cnn": {**_OPTIMIZER, "dropout": Accepts(low=0.0, high=0.5, high_open=True)},
    "resnet50": {**_OPTIMIZER, "epochs": Accepts(low=1, integer=True)},
    "vgg-1": {**_OPTIMIZER, **_DROPOUT},
    "vgg-2": {**_OPTIMIZER, **_DROPOUT},
    "googlenet": {**_OPTIMIZER, **_DROPOUT},
    "lstm": {**_OPTIMIZER, **_DROPOUT, "hidden": Accepts(low=1, high=100_000, integer=True)},
}


def accepted(workload: str) -> dict[str, Accepts]:
    """The declared hyperparameters of a built-in workload ({} for user models)."""
    return ACCEPTED.get(workload, {})


def refused(workload: str, name: str, values: tuple[Any, ...]) -> str | None:
    """Why the workload's builder would refuse some of ``values`` for ``name``, else None.

    ``values`` are a numeric range's ends or a categorical parameter's choices."""
    rule = accepted(workload).get(name)
    if rule is None:
        return None
    bad = [v for v in values if not rule.takes(v)]
    if not bad:
        return None
    return (
        f"workload '{workload}' takes {name} {rule.describe()}, "
        f"but the space allows {', '.join(repr(v) for v in bad)}"
    )
