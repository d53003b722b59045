"""`advisor token`: create, list and revoke the service's bearer tokens."""

from __future__ import annotations

import json
from pathlib import Path

import click

from advisor.cli.serve import storage_options


@click.group("token")
def token() -> None:
    """Bearer tokens for `advisor serve` (stored hashed; shown once)."""


@token.command("create")
@click.argument("name")
@click.option(
    "--team",
    default="default",
    show_default=True,
    help="The team the token belongs to: it sees and writes only that team's jobs and studies.",
)
@storage_options
def create(name: str, team: str, storage: str | None, storage_file: Path | None) -> None:
    """Create a token called NAME for a team and print it (only this once)."""
    from advisor.service.auth import create_token
    from advisor.service.server import storage_from, storage_url
    from advisor.service.teams import check_team

    check_team(team)  # before the storage is opened
    click.echo(create_token(storage_url(storage_from(storage, storage_file)), name, team))


@token.command("revoke")
@click.argument("name")
@storage_options
def revoke(name: str, storage: str | None, storage_file: Path | None) -> None:
    """Revoke the token NAME."""
    from advisor.service.auth import revoke_token
    from advisor.service.server import storage_from, storage_url

    revoke_token(storage_url(storage_from(storage, storage_file)), name)
    click.echo(f"revoked {name}")


@token.command("list")
@storage_options
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def list_(storage: str | None, storage_file: Path | None, as_json: bool) -> None:
    """List token names with their teams (never the tokens)."""
    from advisor.service.auth import list_tokens
    from advisor.service.server import storage_from, storage_url

    rows = list_tokens(storage_url(storage_from(storage, storage_file)))
    if as_json:
        click.echo(json.dumps(rows, indent=1))
        return
    for r in rows:
        click.echo(
            f"{r['name']}\tteam {r['team']}\tcreated {r['created']}\t{'revoked ' + r['revoked'] if r['revoked'] else 'active'}"
        )
