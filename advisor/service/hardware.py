"""Machines a team owns (issue #37), kept in the service's database per team: each is a
candidate of that team's suggestions (and of no other team's), priced by amortisation +
energy as ``advisor hardware add`` prices the machines of ``$ADVISOR_HOME/hardware.json``.

A suggestion job runs inside ``team_scope``: the machines you own are then the team's rows,
read when the job is queued (its study's name counts them, so adding a machine asks a new
question) and again when it runs. The workers' own ``hardware.json`` is not read for jobs.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import delete, select

from advisor.errors import AdvisorError
from advisor.providers.owned import (
    OwnedMachine,
    checked,
    owned_scope,
    parse_gpus,
    parse_lifetime,
)
from advisor.service import db


def describe(machine: OwnedMachine) -> dict[str, Any]:
    """A machine as the API shows it: its inputs, key, price per hour of use and formula."""
    return {
        **machine.to_dict(),
        "key": f"owned:{machine.name}",
        "usd_per_hour": machine.usd_per_hour,
        "formula": machine.formula(),
    }


def add(url: str, team: str, request: dict[str, Any]) -> dict[str, Any]:
    """Add (or replace) the team's machine ``request["name"]`` (a ``HardwareRequest``); an
    unknown board or a bad lifetime is an AdvisorError naming the fix."""
    from advisor.providers import catalog

    board, count = parse_gpus(request["gpus"])
    machine = OwnedMachine(
        request["name"], board, count, request["purchase_usd"],
        parse_lifetime(request["lifetime"]), request["power_w"], request["usd_per_kwh"],
        request.get("utilisation", 0.5), request.get("vcpus"), request.get("memory_gib"),
    )  # fmt: skip
    machine = checked(machine, catalog.load().accelerators)
    table = db.owned_machines
    with db.engine_for(url).begin() as conn:
        conn.execute(delete(table).where(table.c.team == team, table.c.name == machine.name))
        conn.execute(
            table.insert().values(
                team=team, name=machine.name, machine=json.dumps(machine.to_dict()),
                created=db.now(url),
            )
        )  # fmt: skip
    return describe(machine)


def machines(url: str, team: str) -> list[OwnedMachine]:
    """The team's machines, by name."""
    table = db.owned_machines
    with db.engine_for(url).connect() as conn:
        rows = conn.execute(
            select(table.c.machine).where(table.c.team == team).order_by(table.c.name)
        ).all()
    out = []
    for i, row in enumerate(rows):  # the one reader of a machine (``OwnedMachine.from_dict``)
        where = f"Machine {i} of team '{team}' in the service's database"
        fix = "remove it (DELETE /v1/hardware/NAME) and add it again."
        try:
            item = json.loads(row.machine)
        except (ValueError, TypeError, RecursionError) as exc:
            raise AdvisorError(f"{where} is not JSON ({type(exc).__name__}).", fix) from exc
        out.append(OwnedMachine.from_dict(item, where, fix))
    return out


def remove(url: str, team: str, name: str) -> bool:
    """Remove the team's machine ``name``; False when the team has none by that name."""
    table = db.owned_machines
    with db.engine_for(url).begin() as conn:
        done = conn.execute(delete(table).where(table.c.team == team, table.c.name == name))
    return bool(done.rowcount)


@contextmanager
def team_scope(url: str, team: str) -> Iterator[None]:
    """Within it, the machines you own are ``team``'s (none when it has none)."""
    with owned_scope(machines(url, team)):
        yield
