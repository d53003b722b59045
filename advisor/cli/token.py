"""`advisor token`: create, list and revoke the service's bearer tokens."""

from __future__ import annotations

import json

import click

_STORAGE = click.option("--storage", help="Storage URL of the service (default: SQLite).")


@click.group("token")
def token() -> None:
    """Bearer tokens for `advisor serve` (stored hashed; shown once)."""


@token.command("create")
@click.argument("name")
@_STORAGE
def create(name: str, storage: str | None) -> None:
    """Create a token called NAME and print it (only this once)."""
    from advisor.service.auth import create_token
    from advisor.service.server import storage_url

    click.echo(create_token(storage_url(storage), name))


@token.command("revoke")
@click.argument("name")
@_STORAGE
def revoke(name: str, storage: str | None) -> None:
    """Revoke the token NAME."""
    from advisor.service.auth import revoke_token
    from advisor.service.server import storage_url

    revoke_token(storage_url(storage), name)
    click.echo(f"revoked {name}")


@token.command("list")
@_STORAGE
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def list_(storage: str | None, as_json: bool) -> None:
    """List token names (never the tokens)."""
    from advisor.service.auth import list_tokens
    from advisor.service.server import storage_url

    rows = list_tokens(storage_url(storage))
    if as_json:
        click.echo(json.dumps(rows, indent=1))
        return
    for r in rows:
        click.echo(
            f"{r['name']}\tcreated {r['created']}\t{'revoked ' + r['revoked'] if r['revoked'] else 'active'}"
        )
