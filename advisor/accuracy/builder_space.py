"""A user model's default ``--tune`` space, read from its builder's keyword arguments
(issue #36): a model brought without a space file has no hyperparameters declared, and
``--tune`` refused with "the space has none".

Each keyword argument with a positive float default (``lr=0.01``) is searched on a log range
around it: ``LOG_DECADES`` decades each way (a prior: learning rates and weight decays are
tuned over decades), a default below 1 kept below 1 (``1 - (1 - v) / 10``: a fraction such as
momentum or dropout never reaches 1). Integers, booleans, strings and the sizes advisor sets
itself (``batch_size``, ``seed``, ``n_train``...) are left alone: their meaning (a layer width,
a choice) cannot be told from the default, so they are searched only when a space file
declares them. A space file with hyperparameters replaces this space.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from advisor.search_spaces.space import FloatParam, Param

LOG_DECADES = 1.0  # a prior: a float default is searched from v / 10 to v * 10
SET_BY_ADVISOR = ("batch_size", "seed", "n_train", "n_val", "threads", "epochs")


@dataclass(frozen=True)
class BuilderSpace:
    """The space read from a builder: the searched floats and what was left alone (why)."""

    params: tuple[Param, ...]
    left_alone: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "from": "the builder's keyword arguments and their defaults (no space declared)",
            "searched": {p.name: _range_text(p) for p in self.params},
            "left_alone": list(self.left_alone),
            "rule": f"a positive float default v: log range v/{10**LOG_DECADES:g}.."
            f"v*{10**LOG_DECADES:g} (below 1 when v < 1); ints, booleans and choices are "
            "searched only when a space file declares them",
        }


def builder_space(defaults: dict[str, Any]) -> BuilderSpace:
    """The space of a builder whose keyword defaults are ``defaults`` (see the module)."""
    params: list[Param] = []
    left: list[str] = []
    factor = 10**LOG_DECADES
    for name, value in defaults.items():
        if name in SET_BY_ADVISOR or name.startswith("_"):
            continue
        if isinstance(value, float) and math.isfinite(value) and value > 0:
            high = value * factor
            if value < 1:
                high = min(high, 1 - (1 - value) / factor)
            params.append(FloatParam(name, value / factor, high, log=True))
        else:
            left.append(f"{name}={value!r}")
    return BuilderSpace(tuple(params), tuple(left))


def _range_text(p: Param) -> str:
    assert isinstance(p, FloatParam)
    return f"{p.low:.3g}..{p.high:.3g} log"
