"""`advisor catalog`: list and filter the priced instance catalog, show accelerator specs,
refresh prices from the providers' public price sources."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, cast

import click

from advisor.cli import console as output
from advisor.cli import params as p
from advisor.errors import AdvisorError

if TYPE_CHECKING:
    from rich.table import JustifyMethod

# Shown when no --service is given: the plain virtual-machine offer of each cloud.
VM_SERVICES = ("ec2", "compute-engine", "azure-vm")


def _split(values: Iterable[str]) -> tuple[str, ...]:
    """Options may repeat or hold comma-separated lists (``--provider aws,gcp``)."""
    return tuple(v.strip() for value in values for v in value.split(",") if v.strip())


def _money(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.3f}".rstrip("0").rstrip(".") if value else "0"


@click.group(invoke_without_command=True)
@click.option("--provider", "providers", multiple=True, help="aws, gcp or azure (repeatable).")
@click.option(
    "--service",
    "services",
    multiple=True,
    help=(
        "ec2, sagemaker, compute-engine, vertex, azure-vm, azure-ml, or 'all' (repeatable). "
        "Default: the virtual-machine services (ec2, compute-engine, azure-vm); the managed "
        "training services' rows are counted below the table."
    ),
)
@click.option(
    "--accelerator",
    "accelerators",
    multiple=True,
    help="Accelerator name or family, case-insensitive (V100, a100, tpu, v5e); 'cpu' for none.",
)
@click.option("--min-gpus", type=p.GPUS, default=0, show_default=True, help="At least N devices.")
@click.option("--max-gpus", type=p.GPUS, default=None, help="At most N devices.")
@click.option("--max-price", type=p.USD, default=None, help="At most this USD/h.")
@click.option("--spot", is_flag=True, help="Only machines with spot capacity; price is spot.")
@click.option("--snapshot", default=None, help="Price snapshot (default: the newest).")
@click.option(
    "--region",
    default=None,
    help="Prices of this region only (e.g. us-east-1, westus3). Default: each machine type "
    "from the cheapest region that sells it (the region column says which).",
)
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list instead of a table.")
@click.pass_context
def catalog(
    ctx: click.Context,
    providers: tuple[str, ...],
    services: tuple[str, ...],
    accelerators: tuple[str, ...],
    min_gpus: int,
    max_gpus: int | None,
    max_price: float | None,
    spot: bool,
    snapshot: str | None,
    region: str | None,
    as_json: bool,
) -> None:
    """List and filter the priced instance catalog (USD per hour).

    Examples: `advisor catalog --provider aws --accelerator V100 --snapshot 2021-02`,
    `advisor catalog --accelerator a100 --spot --max-price 10`,
    `advisor catalog accelerators`, `advisor catalog refresh --provider azure`.
    """
    if ctx.invoked_subcommand is not None:
        return
    from advisor.providers.catalog import load, stale_warning

    cat = load(snapshot, region=region)
    wanted = _split(services)
    every = cat.filter(
        providers=_split(providers),
        services=() if "all" in wanted else wanted,
        accelerators=_split(accelerators),
        min_gpus=min_gpus,
        max_gpus=max_gpus,
        max_price=max_price,
        spot=spot,
    )
    rows = every if wanted else [r for r in every if r.service in VM_SERVICES]
    hidden = sorted({r.service for r in every} - {r.service for r in rows})
    rows.sort(key=lambda r: (r.provider, r.service, r.price(spot), r.instance_type))
    if as_json:
        click.echo(json.dumps([dict(r.to_dict(), key=r.key) for r in rows], indent=2))
        warning = stale_warning(cat.snapshot, rows)
        if warning:
            click.echo(f"Warning: {warning}", err=True)
        return
    from rich.table import Table

    table = Table(
        title=f"catalog snapshot {cat.snapshot}: {len(rows)} machine types (USD per hour)",
        title_justify="left",
    )
    for name, justify in (
        ("provider", "left"),
        ("service", "left"),
        ("type", "left"),
        ("vCPUs", "right"),
        ("mem GiB", "right"),
        ("accelerator", "left"),
        ("acc mem GiB", "right"),
        ("on-demand", "right"),
        ("spot", "right"),
        ("region", "left"),
        ("date", "left"),
    ):
        table.add_column(name, justify=cast("JustifyMethod", justify), no_wrap=True)
    for r in rows:
        acc = f"{r.accelerator} x{r.accelerator_count}" if r.accelerator else "-"
        table.add_row(
            r.provider,
            r.service,
            r.instance_type,
            str(r.vcpus),
            f"{r.memory_gib:g}",
            acc,
            f"{r.accelerator_memory_gib:g}" if r.accelerator else "-",
            _money(r.on_demand_usd_per_h),
            _money(r.spot_usd_per_h),
            r.region,
            r.price_date,
        )
    output.console().print(table)
    if hidden:
        click.echo(
            f"{len(every) - len(rows)} more rows on managed training services "
            f"({', '.join(hidden)}): add --service {hidden[0]} or --service all to list them."
        )
    if not rows:
        click.echo("No machine type matches these filters.", err=True)
    warning = stale_warning(cat.snapshot, rows)
    if warning:
        click.echo(f"Warning: {warning}", err=True)


@catalog.command()
@click.option("--snapshot", default=None, help="Price snapshot (default: the newest).")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list instead of a table.")
def accelerators(snapshot: str | None, as_json: bool) -> None:
    """List the accelerator specs (vendor peak figures, dense, per device)."""
    from advisor.providers.catalog import load

    specs = list(load(snapshot).accelerators.values())
    if as_json:
        click.echo(json.dumps([s.to_dict() for s in specs], indent=2))
        return
    from rich.table import Table

    table = Table(title="accelerators (peak TFLOP/s dense; link GB/s per direction)")
    for name in ("name", "FP32", "TF32", "FP16", "BF16", "mem GiB", "mem GB/s", "link", "GB/s"):
        table.add_column(name, no_wrap=True)
    for s in specs:
        table.add_row(
            s.name,
            f"{s.fp32_tflops:g}",
            *(
                f"{v:g}" if v is not None else "-"
                for v in (s.tf32_tflops, s.fp16_tflops, s.bf16_tflops)
            ),
            f"{s.memory_gib:g}",
            f"{s.memory_bandwidth_gbs:g}",
            s.link,
            f"{s.link_gbs:g}",
        )
    output.console().print(table)


@catalog.command()
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list.")
def snapshots(as_json: bool) -> None:
    """List the available price snapshots (shipped and refreshed), oldest first."""
    from advisor.providers.catalog import snapshot_dir
    from advisor.providers.catalog import snapshots as names

    found = [{"snapshot": n, "path": str(snapshot_dir(n)[1])} for n in names()]
    if as_json:
        click.echo(json.dumps(found, indent=2))
        return
    for item in found:
        click.echo(f"{item['snapshot']}\t{item['path']}")


@catalog.command()
@click.option(
    "--provider",
    required=True,
    type=click.Choice(["aws", "azure", "gcp"]),
    help="Whose public price source to read.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def refresh(provider: str, as_json: bool) -> None:
    """Pull current prices into a new dated snapshot under ADVISOR_HOME.

    AWS: Price List API via boto3 (needs AWS credentials). Azure: Retail Prices API (no
    credentials). GCP: Cloud Billing Catalog API (needs $GOOGLE_API_KEY). Hardware columns
    come from the newest existing snapshot; rows the source does not price keep their old
    price and say so. On any failure nothing is written.
    """
    from advisor.providers.catalog.refresh import refresh as do_refresh

    show = not as_json and sys.stderr.isatty()
    if show:
        with output.console(stderr=True).status(f"reading {provider} prices ..."):
            result = do_refresh(provider)
    else:
        result = do_refresh(provider)
    if as_json:
        click.echo(json.dumps(result.to_dict(), indent=2))
        return
    click.echo(
        f"Wrote snapshot {result.snapshot} ({result.path}): {result.updated} {provider} "
        f"machine types repriced, {result.kept} kept from {result.base_snapshot}."
    )
    for note in result.notes:
        click.echo(f"  note: {note}")


@catalog.command("import-skypilot")
@click.argument("folder", required=False, type=click.Path(file_okay=False, path_type=Path))
@click.option(
    "--region",
    "regions",
    multiple=True,
    help="Import only these regions (repeatable or comma-separated). Default: every region.",
)
@click.option("--name", default=None, help="Snapshot name (default: today's date).")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def import_skypilot(
    folder: Path | None, regions: tuple[str, ...], name: str | None, as_json: bool
) -> None:
    """Turn SkyPilot's catalog files into a dated snapshot (no credentials, no network).

    FOLDER holds aws/, gcp/, azure/ with vms.csv (default: the newest version under
    ~/.sky/catalogs). Virtual-machine rows are repriced in every region SkyPilot lists
    (spot: the lowest zone price in the region; GCP GPU VMs: VM plus accelerator row);
    managed-service rows keep their prices. The new snapshot becomes the newest.
    """
    from advisor.providers.catalog.skypilot import import_skypilot as do_import

    result = do_import(folder, regions=_split(regions), name=name)
    if as_json:
        click.echo(json.dumps(result.to_dict(), indent=2))
        return
    click.echo(
        f"Wrote snapshot {result.snapshot} ({result.path}): {result.priced} rows priced from "
        f"SkyPilot's catalog in {result.regions} regions, {result.kept} kept from "
        f"{result.base_snapshot}."
    )
    for cloud, path in sorted(result.files.items()):
        click.echo(f"  {cloud}: {path}")


__all__ = ["AdvisorError", "catalog"]
