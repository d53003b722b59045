"""`advisor hardware add|list|remove`: machines you own, candidates priced by amortisation +
energy (issue #37; ``advisor.providers.owned``)."""

from __future__ import annotations

import json
from typing import Any

import click

from advisor.cli import params as p


@click.group("hardware")
def hardware() -> None:
    """Machines you own: each becomes a candidate of `advisor suggest`, predicted by the same
    GPU model and priced per hour of use by amortisation + energy.

    \b
    Example: advisor hardware add rig --gpus 4xA100-80GB --purchase-usd 60000 --lifetime 4y \\
               --power-w 2000 --usd-per-kwh 0.30
    """


def _service(f: Any) -> Any:
    """``--server`` / ``--token``: the team's machines on an advisor service instead."""
    f = click.option("--token", envvar="ADVISOR_TOKEN", help="Service token ($ADVISOR_TOKEN).")(f)
    return click.option(
        "--server",
        help="Keep it on an advisor service (`advisor serve`) at this URL, for your token's "
        "team (default: $ADVISOR_HOME/hardware.json).",
    )(f)


def _client(server: str, token: str | None) -> Any:
    from advisor.service.client import Client

    return Client(server, token)


@hardware.command("add")
@click.argument("name")
@click.option("--gpus", required=True, help="COUNTxBOARD, e.g. 4xA100-80GB (a board with a spec).")
@click.option("--purchase-usd", required=True, type=p.FiniteFloat(0.0, 1e9), help="What it cost.")
@click.option("--lifetime", required=True, help="How long it is used: 3y, 36mo, 26000h.")
@click.option("--power-w", required=True, type=p.FiniteFloat(0.0, 1e6), help="Power draw, W.")
@click.option(
    "--usd-per-kwh", required=True, type=p.FiniteFloat(0.0, 100.0), help="Electricity price."
)
@click.option(
    "--utilisation",
    type=p.FiniteFloat(0.0, 1.0, low_open=True),
    default=0.5,
    show_default=True,
    help="Share of its lifetime it is busy; the purchase is spread over those hours (a prior: "
    "give yours).",
)
@click.option("--vcpus", type=p.POSITIVE, help="CPU cores (default 8 per GPU, a prior).")
@click.option("--memory-gib", type=p.FiniteFloat(1.0, 1e6), help="RAM (default 32 GiB per GPU).")
@_service
def add(
    name: str,
    gpus: str,
    purchase_usd: float,
    lifetime: str,
    power_w: float,
    usd_per_kwh: float,
    utilisation: float,
    vcpus: int | None,
    memory_gib: float | None,
    server: str | None,
    token: str | None,
) -> None:
    """Add (or replace) machine NAME."""
    if server:  # issue #37: the team's machine, in the service's database
        body = {"name": name, "gpus": gpus, "purchase_usd": purchase_usd, "lifetime": lifetime,
                "power_w": power_w, "usd_per_kwh": usd_per_kwh, "utilisation": utilisation,
                "vcpus": vcpus, "memory_gib": memory_gib}  # fmt: skip
        done = _client(server, token).add_hardware(body)
        click.echo(f"{done['key']}: {done['count']} x {done['board']}; {done['formula']}")
        click.echo(f"saved on {server} for your team; its suggestions now count it")
        return
    from advisor.providers import catalog
    from advisor.providers.owned import (
        OwnedMachine,
        checked,
        load_owned,
        parse_gpus,
        parse_lifetime,
        save_owned,
    )

    board, count = parse_gpus(gpus)
    machine = OwnedMachine(
        name, board, count, purchase_usd, parse_lifetime(lifetime), power_w, usd_per_kwh,
        utilisation, vcpus, memory_gib,
    )  # fmt: skip
    machine = checked(machine, catalog.load().accelerators)  # an unknown board: one line
    kept = [m for m in load_owned() if m.name != name]
    path = save_owned([*kept, machine])
    click.echo(f"owned:{name}: {count} x {machine.board}; {machine.formula()}")
    click.echo(f"saved in {path}; `advisor suggest` now counts it as a candidate")


@hardware.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list instead of lines.")
@_service
def list_(server: str | None, token: str | None, as_json: bool) -> None:
    """List the machines you own and their price per hour of use."""
    from advisor.providers.owned import OwnedMachine, hardware_path, load_owned

    if server:
        listed = _client(server, token).hardware()
        fields = set(OwnedMachine.__dataclass_fields__)
        machines = [OwnedMachine(**{k: v for k, v in m.items() if k in fields}) for m in listed]
    else:
        machines = load_owned()
    if as_json:  # issue #50: every listing has --json
        click.echo(json.dumps([_as_dict(m) for m in machines], indent=1))
        return
    if not machines and server:
        click.echo(f"your team owns no machines on {server}; add one with `advisor hardware add`")
    elif not machines:
        click.echo(f"no machines in {hardware_path()}; add one with `advisor hardware add`")
    for m in machines:
        click.echo(f"owned:{m.name}: {m.count} x {m.board}; {m.formula()}")


def _as_dict(machine: Any) -> dict[str, Any]:
    """A machine as ``hardware list --json`` prints it: its key, its fields, and its price per
    hour of use with the formula behind it."""
    from dataclasses import asdict

    return {
        "key": f"owned:{machine.name}",
        **asdict(machine),
        "usd_per_hour": machine.usd_per_hour,
        "formula": machine.formula(),
    }


@hardware.command("remove")
@click.argument("name")
@_service
def remove(name: str, server: str | None, token: str | None) -> None:
    """Remove machine NAME."""
    from advisor.errors import AdvisorError
    from advisor.providers.owned import hardware_path, load_owned, save_owned

    if server:
        _client(server, token).remove_hardware(name)
        click.echo(f"removed {name} from your team's machines on {server}")
        return

    machines = load_owned()
    if name not in {m.name for m in machines}:
        known = ", ".join(m.name for m in machines) or "none"
        raise AdvisorError(
            f"No machine '{name}' in {hardware_path()} (known: {known}).",
            "see `advisor hardware list`.",
        )
    save_owned([m for m in machines if m.name != name])
    click.echo(f"removed {name}")
