"""Running a local probe with a progress line, and printing a probe's phases: what
``advisor probe``, ``probe --on``, ``estimate`` and ``predict`` share."""

from __future__ import annotations

from typing import Any

from advisor.cli import console as output
from advisor.errors import AdvisorError
from advisor.search_spaces.workloads import ModelRef


def check_workload(model: str, framework: str) -> None:
    """Fail early, with one line, on an unknown built-in model or framework."""
    from advisor.probes.runner import FRAMEWORK_ENTRY
    from advisor.search_spaces.workloads import get

    if framework not in FRAMEWORK_ENTRY:
        raise AdvisorError(
            f"Unknown framework '{framework}'.", f"use one of: {', '.join(FRAMEWORK_ENTRY)}."
        )
    from advisor.search_spaces.workloads.available import check_framework, check_user_module

    check_framework(framework)  # issue #28: not installed -> one line, not a failed probe
    if ModelRef(model).is_user:
        check_user_module(model)
    else:
        get(model).builder  # noqa: B018 - raises the one-line "unknown model" error
        if framework not in get(model).builders:
            raise AdvisorError(
                f"Workload '{model}' has no {framework} version.",
                f"use --framework {' or '.join(get(model).builders)}.",
            )


def run_with_progress(request: Any, show: bool = True) -> Any:
    """Run a probe with its progress on stderr (issue #50: a live line on a terminal, plain
    lines off one, ``advisor.cli.progress``); ``show=False`` runs it silently."""
    from advisor.probes.runner import run_probe

    if not show:
        return run_probe(request)
    from advisor.cli.progress import reporting

    with reporting() as hook:
        return probe_reporting(request, hook)


def probe_reporting(request: Any, hook: Any) -> Any:
    """Run a probe, its stages told to ``hook`` (a ``Progress`` already showing)."""
    from advisor.probes.runner import run_probe

    what = f"probing {request.workload} at batch {request.batch_size}"
    # its start on a line of its own: the iterations' rate is measured from the first one
    hook(f"start:{what} (starting: the framework and the model)", 0, 1)

    def update(phase: str, done: int, total: int) -> None:
        hook(f"probe:{what} ({phase})", done, total)

    return run_probe(request, on_progress=update)


def _fmt_bytes(n: int | None) -> str:
    return "-" if n is None else f"{n / 2**20:.0f} MiB"


def render(result: Any) -> None:
    """Print a probe's measured phases as a table."""
    from rich.markup import escape
    from rich.table import Table

    from advisor.prediction.run.iteration_model import phase_times, relative_spread

    console = output.console()
    if not result.ok:
        console.print(escape(f"probe failed ({result.status}): {result.reason}"))
        return
    ph = phase_times(result)
    table = Table(
        title=f"probe: {result.workload}, batch {result.batch_size}, "
        f"{result.device}, {result.threads} threads ({result.framework})"
    )
    table.add_column("phase")
    table.add_column("measured", justify="right")
    table.add_column("note")
    from advisor.probes.gradient_noise import from_probe

    spread = relative_spread(result.iteration_s[1:])
    rows = [
        ("init", f"{ph.init.value:.2f} s", result.fingerprint.get("init_note", "")),
        ("t1 (first iteration)", f"{ph.t1.value:.4f} s", ""),
        (
            "t2 (steady, median)",
            f"{ph.t2.value:.4f} s",
            f"90% [{ph.t2.low:.4f}, {ph.t2.high:.4f}], IQR/median {spread:.1%}, "
            f"iterations 2..{len(result.iteration_s)}",
        ),
        ("v1 (first validation)", f"{ph.v1.value:.3f} s", _val_note(result)),
        ("v2 (second validation)", f"{ph.v2.value:.3f} s", ""),
        ("FLOPs / iteration", f"{(result.flops_per_iteration or 0) / 1e9:.2f} G", ""),
        ("samples / s", f"{result.samples_per_s or 0:.0f}", ""),
        ("peak host memory", _fmt_bytes(result.peak_host_memory_bytes), ""),
        ("peak accelerator memory", _fmt_bytes(result.peak_accelerator_memory_bytes), ""),
        ("CPU utilisation", f"{(result.cpu_utilisation or 0):.0%}", ""),
        ("probe wall time", f"{result.wall_s:.1f} s", ""),
    ]
    noise = from_probe(result)  # issue #19
    if noise is not None:
        value = f"{noise.value:.0f}" if noise.resolved else "unresolved (inf)"
        rows.append(
            (
                "gradient noise scale",
                value,
                f"B_simple, {noise.confidence:.0%} [{noise.low:.0f}, {noise.high:.0f}], "
                f"{noise.iterations} batches, micro-batches of {noise.small_batch} pooled "
                f"over {noise.big_batch} samples, "
                f"measured in {noise.overhead_s:.1f} s (in the wall time)",
            )
        )
    for row in rows:
        table.add_row(*row)
    console.print(table)
    for warning in result.warnings:
        console.print(f"warning: {warning}")


def _val_note(result: Any) -> str:
    if result.validation_scale == 1.0:
        return f"{result.validation_samples_measured} samples"
    return (
        f"{result.validation_samples_measured} samples measured, scaled x"
        f"{result.validation_scale:.2f} to {result.n_val}"
    )
