"""Bearer tokens: created once, shown once, stored as SHA-256 hashes, revocable.

A token is 32 random bytes (``secrets.token_urlsafe``) with an ``adv_`` prefix; its SHA-256
is what the database holds, so a stolen database gives no token. Lookup is by hash, and the
comparison is constant-time (``hmac.compare_digest``). Each token belongs to one team
(``advisor.service.teams``); tokens made before teams are the default team's.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from sqlalchemy import insert, select, update
from sqlalchemy.exc import IntegrityError

from advisor.errors import AdvisorError
from advisor.service import db, teams

PREFIX = "adv_"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}$")


def token_hash(token: str) -> str:
    """The SHA-256 hex digest stored for ``token``."""
    return hashlib.sha256(token.encode()).hexdigest()


@dataclass(frozen=True)
class Caller:
    """Who sent a request: the token's name and its team."""

    name: str
    team: str

    def __post_init__(self) -> None:
        teams.check_team(self.team)


def create_token(url: str, name: str, team: str = teams.DEFAULT_TEAM) -> str:
    """Create a token called ``name`` for ``team``; return the plain token (shown once)."""
    teams.check_team(team)
    if not _NAME.match(name):
        raise AdvisorError(
            f"Token name '{name[:80]}' is not allowed.",
            "use letters, digits, '.', '_', '@' or '-', at most 64 characters.",
        )
    token = PREFIX + secrets.token_urlsafe(32)
    try:
        with db.engine_for(url).begin() as conn:
            conn.execute(
                insert(db.tokens).values(
                    name=name,
                    hash=token_hash(token),
                    created=datetime.now(timezone.utc),
                    team=team,
                )
            )
    except IntegrityError as exc:
        raise AdvisorError(
            f"A token named '{name}' exists already.",
            f"pick another name or revoke it: advisor token revoke {name}",
        ) from exc
    return token


def revoke_token(url: str, name: str) -> None:
    """Revoke the token ``name``; requests with it get 401 from then on."""
    with db.engine_for(url).begin() as conn:
        done = conn.execute(
            update(db.tokens)
            .where(db.tokens.c.name == name, db.tokens.c.revoked.is_(None))
            .values(revoked=datetime.now(timezone.utc))
        )
    if done.rowcount == 0:
        raise AdvisorError(f"No active token named '{name}'.", "list them: advisor token list")


def list_tokens(url: str) -> list[dict[str, Any]]:
    """Token names with their team, creation and revocation times (never hashes)."""
    t = db.tokens.c
    with db.engine_for(url).connect() as conn:
        rows = conn.execute(select(t.name, t.team, t.created, t.revoked).order_by(t.name)).all()
    return [
        {
            "name": r.name,
            "team": teams.team_of(r.team),
            "created": r.created.isoformat() if r.created else None,
            "revoked": r.revoked.isoformat() if r.revoked else None,
        }
        for r in rows
    ]


def verify(url: str, token: str | None) -> Caller | None:
    """Who holds ``token`` when it is valid and not revoked, else None."""
    if not token or not token.startswith(PREFIX) or len(token) > 200:
        return None
    digest = token_hash(token)
    with db.engine_for(url).connect() as conn:
        row = conn.execute(
            select(db.tokens.c.name, db.tokens.c.hash, db.tokens.c.revoked, db.tokens.c.team).where(
                db.tokens.c.hash == digest
            )
        ).first()
    if row is None or row.revoked is not None or not hmac.compare_digest(row.hash, digest):
        return None
    return Caller(str(row.name), teams.team_of(row.team))
