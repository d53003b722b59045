"""The training-plan options of ``advisor predict`` (issue #35): ``--precision`` and
``--plan``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from advisor.prediction.step.plan import DEFAULT_PRECISION, PRECISION_CHOICES, PRECISION_HELP

PLAN_HELP = (
    "The rest of the training plan, field=value pairs: accumulation=STEPS (micro-batches per "
    "optimizer step), checkpointing=none|blocks, sharding=none|optimizer|gradients|parameters "
    "(ZeRO-1/2/3, FSDP). E.g. --plan accumulation=8,checkpointing=blocks."
)


def plan_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """Add ``--precision`` and ``--plan`` to a command."""
    func = click.option("--plan", "plan_text", default=None, help=PLAN_HELP)(func)
    return click.option(
        "--precision",
        type=click.Choice(PRECISION_CHOICES),
        default=DEFAULT_PRECISION,
        show_default=True,
        help=PRECISION_HELP,
    )(func)


def plan_of(plan_text: str | None) -> Any:
    """The ``TrainingPlan`` of ``--plan`` text (its precision left to ``--precision``), or
    None when not given."""
    if not plan_text:
        return None
    from advisor.prediction.step.plan import parse_plan

    return parse_plan(plan_text)


def precision_of(plan_text: str | None, precision: str) -> str:
    """The one precision of ``--plan precision=...`` and ``--precision`` (``auto``, the
    default, gives way to the plan's); a one-line error when both are given and differ."""
    from advisor.prediction.step.plan import one_precision, plan_fields

    return one_precision(plan_fields(plan_text).get("precision"), precision)
