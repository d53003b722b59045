"""The operator trace summarised in a terminal (issue #26): the operators of a training step
with the most predicted device time on a chosen GPU, for ``advisor probe`` and ``advisor
predict`` (``--top-ops N --on-gpu NAME``)."""

from __future__ import annotations

from typing import Any

import click

from advisor.errors import AdvisorError

DEFAULT_GPU = "A100-40GB"


def operator_options(fn: Any) -> Any:
    """``--top-ops N`` and ``--on-gpu NAME``."""
    fn = click.option(
        "--on-gpu",
        "on_gpu",
        default=None,
        metavar="GPU",
        help=f"GPU of the --top-ops table (a catalog accelerator: T4, V100, A100-40GB, H100, "
        f"...; default {DEFAULT_GPU}).",
    )(fn)
    return click.option(
        "--top-ops",
        "top_ops",
        type=click.IntRange(1, 1000),
        default=None,
        metavar="N",
        help="Also show the N operators of the training step with the most predicted device "
        "time on --on-gpu (the GPU kernel model on the step's operator trace).",
    )(fn)


def operators_table(probe: Any, n: int, gpu: str | None = None) -> str:
    """The ``n`` operators of ``probe``'s traced step with the most device time on ``gpu``,
    with the step's total and how it was predicted."""
    from advisor.prediction.kernels import gpu_spec, operator_times
    from advisor.probes.operators import operator_trace_of, render_shares, top_operators

    trace = operator_trace_of(probe)
    if trace is None:
        raise AdvisorError(
            f"The probe of {probe.workload} carries no operator trace.",
            "predict from it once (advisor predict) or probe again with this version.",
        )
    spec = gpu_spec(gpu or DEFAULT_GPU)
    ops = list(trace.operators)
    seconds = operator_times(ops, [spec]).value[:, 0]
    per_call = {id(op): float(t) for op, t in zip(ops, seconds, strict=True)}
    shares = top_operators(trace, lambda op: per_call[id(op)], n)
    total = sum(float(t) * op.count for op, t in zip(ops, seconds, strict=True))
    how = "run on the CPU" if trace.executed else "traced without running"
    head = (
        f"{trace.workload}, batch {trace.batch_size} ({how}): {len(ops)} operators, "
        f"{trace.launches} kernel launches, {trace.flops / 1e9:,.1f} GFLOP per step; predicted "
        f"device time on {spec.name}: {total * 1e3:.3g} ms per step (GPU kernel model, "
        "docs/kernel-model.md); the top operators:"
    )
    return head + "\n" + render_shares(shares)


def show_operators(probe: Any, n: int | None, gpu: str | None) -> None:
    """Print the table when ``--top-ops`` was given (``--on-gpu`` alone is an error)."""
    from advisor.cli import console as output

    if n is None:
        if gpu is not None:
            raise AdvisorError("--on-gpu needs --top-ops.", "add e.g. --top-ops 10.")
        return
    output.console().print(operators_table(probe, n, gpu), markup=False, highlight=False)
