"""What a price source returns, and the small HTTP helper the REST sources share."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any

TIMEOUT_S = 30.0


class SourceError(Exception):
    """A price source could not be read (network, HTTP status, credentials, bad payload)."""


@dataclass(frozen=True)
class Quote:
    """Prices a source gave for one catalog key (None: the source had no such price)."""

    on_demand: float | None = None
    spot: float | None = None

    def __post_init__(self) -> None:
        for name in ("on_demand", "spot"):
            value = getattr(self, name)
            if value is not None and not 0 <= value < float("inf"):
                raise ValueError(f"{name} must be finite and >= 0, but got {value}")


def get_json(url: str, timeout_s: float = TIMEOUT_S) -> Any:
    """GET ``url`` and decode JSON; any failure becomes SourceError with the reason."""
    request = urllib.request.Request(url, headers={"Accept": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            body = response.read()
    except urllib.error.HTTPError as exc:
        raise SourceError(f"HTTP {exc.code} {exc.reason}") from exc
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise SourceError(f"{reason}") from exc
    try:
        return json.loads(body)
    except ValueError as exc:
        raise SourceError(f"the response is not JSON ({exc})") from exc
