"""Teams: each token belongs to one team, and a team sees and writes only its own jobs and
studies. Internal studies (the probe cache and the like) are nobody's.

Studies of one storage are kept apart by name: the default team's study ``NAME`` is stored as
``NAME`` (as before teams, and as ``advisor suggest --storage`` names it), another team's as
``TEAM/NAME``. A user's study name cannot hold ``/`` (``schemas.check_name``), so no name of
one team can reach another's, and the API shows each team its names without the prefix.
Tokens and jobs made before teams existed have no team: they are the default team's.
"""

from __future__ import annotations

import re
from functools import cache

from advisor.errors import AdvisorError

DEFAULT_TEAM = "default"
SEPARATOR = "/"
_TEAM = re.compile(r"^[a-z0-9][a-z0-9_-]{0,31}$")


def check_team(team: str) -> str:
    """A team name: lower-case letters, digits, '_' and '-', at most 32 characters."""
    if not _TEAM.match(team):
        raise AdvisorError(
            f"Team name '{team[:40]}' is not allowed.",
            "use lower-case letters, digits, '_' or '-', at most 32 characters.",
        )
    return team


def team_of(stored: str | None) -> str:
    """The team of a token or job row (None: made before teams, the default team)."""
    return stored or DEFAULT_TEAM


@cache
def internal_study_names() -> frozenset[str]:
    """Studies the advisor keeps for itself in the storage, never a user's (lower case):
    the local probe cache, the remote probe cache and the calibration ledger."""
    from advisor.service.api import internal_studies

    return frozenset(n.lower() for n in internal_studies())


def is_internal(name: str) -> bool:
    """Whether ``name`` is one of the advisor's internal studies (any case)."""
    return name.lower() in internal_study_names()


def stored_name(team: str, name: str) -> str:
    """The name under which ``team``'s study ``name`` is stored."""
    return name if team == DEFAULT_TEAM else f"{team}{SEPARATOR}{name}"


def public_name(team: str, stored: str) -> str | None:
    """The name ``team`` knows the stored study by, or None when it is not the team's."""
    if is_internal(stored):
        return None
    if team == DEFAULT_TEAM:
        return None if SEPARATOR in stored else stored
    prefix = f"{team}{SEPARATOR}"
    return stored[len(prefix) :] if stored.startswith(prefix) else None
