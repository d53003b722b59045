"""`advisor hardware add|list|remove`: machines you own, candidates priced by amortisation +
energy (issue #37; ``advisor.providers.owned``)."""

from __future__ import annotations

import json
from collections.abc import Callable
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


# The ranges are checked once, by the machine itself (``advisor.providers.owned_checks``:
# the same for this command, hardware.json and the service); here only that each is a number.
@hardware.command("add")
@click.argument("name")
@click.option("--gpus", required=True, help="COUNTxBOARD, 1 to 16 GPUs, e.g. 4xA100-80GB.")
@click.option(
    "--purchase-usd", required=True, type=p.FiniteFloat(), help="What it cost (> 0, <= 1e9)."
)
@click.option("--lifetime", required=True, help="How long it is used: 3y, 36mo, 26000h.")
@click.option(
    "--power-w", required=True, type=p.FiniteFloat(), help="Power draw, W (> 0, <= 100000)."
)
@click.option(
    "--usd-per-kwh", required=True, type=p.FiniteFloat(), help="Electricity price (0-100)."
)
@click.option(
    "--utilisation",
    type=p.FiniteFloat(),
    default=0.5,
    show_default=True,
    help="Share of its lifetime it is busy, 0.01-1; the purchase is spread over those hours "
    "(a prior: give yours).",
)
@click.option("--vcpus", type=p.POSITIVE, help="CPU cores, <= 4096 (default 8 per GPU, a prior).")
@click.option("--memory-gib", type=p.FiniteFloat(), help="RAM, 1-65536 (default 32 GiB per GPU).")
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
    from advisor.providers.owned import OwnedMachine, checked, parse_gpus, parse_lifetime

    board, count = parse_gpus(gpus)
    machine = OwnedMachine(
        name, board, count, purchase_usd, parse_lifetime(lifetime), power_w, usd_per_kwh,
        utilisation, vcpus, memory_gib,
    )  # fmt: skip
    machine = checked(machine, catalog.load().accelerators)  # an unknown board: one line
    path = _edit(lambda machines: [*(m for m in machines if m.name != name), machine])
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
        fix = "ask the service's operator (its answer does not hold a machine)."
        machines = [
            OwnedMachine.from_dict(
                {k: v for k, v in m.items() if k in fields} if isinstance(m, dict) else m,
                f"The machine {i} {server} listed",
                fix,
            )
            for i, m in enumerate(listed)
        ]
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
    from advisor.providers.owned import hardware_path

    if server:
        _client(server, token).remove_hardware(name)
        click.echo(f"removed {name} from your team's machines on {server}")
        return

    def without(machines: list[Any]) -> list[Any]:
        if name not in {m.name for m in machines}:
            known = ", ".join(m.name for m in machines) or "none"
            raise AdvisorError(
                f"No machine '{name}' in {hardware_path()} (known: {known}).",
                "see `advisor hardware list`.",
            )
        return [m for m in machines if m.name != name]

    _edit(without)
    click.echo(f"removed {name}")


def _edit(change: Callable[[list[Any]], list[Any]]) -> Any:
    """Read ``hardware.json``, ``change`` its machines and write it back, under its lock
    (``advisor.storage.locks.file_lock``, as the study storage's writers take theirs), so
    that commands run at once each keep their change; the write is atomic (``save_owned``).
    Ctrl-C waits for the write. Returns the file's path."""
    from advisor.providers.owned import load_owned, lock_path, save_owned
    from advisor.storage.checks import check_home
    from advisor.storage.locks import file_lock, sigint_deferred

    check_home()  # ADVISOR_HOME a file or read-only: one line, before the lock is made
    with file_lock(lock_path()):
        machines = change(load_owned())
        with sigint_deferred():
            return save_owned(machines)
