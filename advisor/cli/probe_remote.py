"""`advisor probe --on MACHINE`: the probe as a managed job on a cloud machine (issue #14)."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

import click

from advisor.errors import AdvisorError
from advisor.providers import registry


def run_remote(
    model: str,
    framework: str,
    batch_size: int,
    iterations: int,
    timeout: float,
    on: str,
    emulate: bool,
    spot: bool,
    storage: str | None,
    out: Path | None,
    as_json: bool,
    cloud: dict[str, Any],
) -> None:
    """Resolve the machine, run (or reuse) its remote probe, print it like a local probe plus
    what the job cost; exit 1 when the probe failed."""
    from advisor.cli.probe_view import render
    from advisor.evaluation.workload import WorkloadInfo
    from advisor.providers.catalog import load
    from advisor.remote.probe import remote_probe, runner_for
    from advisor.remote.settings import CloudSettings, provider_of
    from advisor.storage.urls import resolve_storage

    catalog = load()
    machine = resolve_machine(catalog, on)
    provider = provider_of(machine.service) or ""
    settings = CloudSettings.load().with_options(provider, **cloud)
    runner = runner_for(machine, settings, emulate=emulate)
    workload = WorkloadInfo(name=model, framework=framework, n_train=1)
    shown = _Status(quiet=as_json)
    probe = remote_probe(
        workload,
        machine,
        batch_size,
        storage=resolve_storage(storage),
        settings=settings,
        runner=runner,
        iterations=iterations,
        max_probe_s=None,  # as `advisor probe` here: no time box, --timeout bounds it
        timeout_s=timeout,
        catalog=catalog,
        on_status=shown,
        spot=spot,
    )
    shown.done()
    if as_json:
        click.echo(json.dumps(probe.to_dict(), sort_keys=True))
    else:
        render(probe.result)
        click.echo(cost_line(probe.to_dict()))
    if out is not None:  # after the printed probe, atomically; a failure is one line
        from advisor.cli.saved_files import PRINTED_PROBE, write_text

        write_text(out, probe.result.to_json() + "\n", "probe result", PRINTED_PROBE)
    if not probe.result.ok:
        sys.exit(1)


def resolve_machine(catalog: Any, name: str) -> Any:
    """The catalog row ``--on`` names; a VM type sold by a managed service too
    (``g2-standard-8``) is that service's row, which is what the probe job runs on and bills."""
    try:
        return catalog.resolve(name, services=[p.managed_service for p in registry.PROVIDERS])
    except AdvisorError:
        return catalog.resolve(name)  # EC2/Compute Engine/Azure VM keys, or the one-line error


def cost_line(probe: dict[str, Any]) -> str:
    """ "measured on sagemaker:ml.g5.xlarge (job NAME): wall 312 s, billed 187 s
    (BillableTimeInSeconds), USD 0.06" -- or "emulated on this machine as ...", and whether
    it came from the cache."""
    job = probe["job"]
    where = (
        f"emulated on this machine as {probe['machine']} (timings are this machine's)"
        if probe["source"] == "emulated"
        else f"measured on {probe['machine']}"
    )
    cost = f"USD {job['cost_usd']:.2f}" + (" (not spent)" if probe["source"] == "emulated" else "")
    cached = "; cached, no job started" if probe["cached"] else ""
    return (
        f"{where} (job {job['job_id']}): wall {job['wall_s']:.0f} s, billed "
        f"{job['billed_s']:.0f} s ({_short(job['billed_source'])}), {cost}{cached}"
    )


def _short(source: str) -> str:
    return source if len(source) <= 60 else source.split(" (", 1)[0]


class _Status:
    """The job's state and elapsed time on stderr: in place on a terminal, else one line per
    change of state and, while it holds, one every ``EVERY_S`` (issue #50: a job queued or
    running for minutes said so once)."""

    def __init__(self, quiet: bool) -> None:
        import time

        self.tty = sys.stderr.isatty()
        self.quiet = quiet
        self.last = ""
        self.clock = time.monotonic
        self.said = -math.inf

    def __call__(self, line: str) -> None:
        from advisor.progress import EVERY_S

        state = line.split(": ", 1)[-1].split(",", 1)[0]
        if self.tty and not self.quiet:
            click.echo(f"\r\x1b[2K{line}", err=True, nl=False)
        elif state != self.last or self.clock() - self.said >= EVERY_S:
            click.echo(line, err=True)
            self.said = self.clock()
        self.last = state

    def done(self) -> None:
        if self.tty and not self.quiet and self.last:
            click.echo("", err=True)
