"""Lazy import of optional dependencies, with an error that names the extra to install."""

from __future__ import annotations

import importlib
from types import ModuleType

from advisor.errors import MissingExtraError


def require(module: str, extra: str, feature: str) -> ModuleType:
    """Import ``module`` or raise a one-line error telling which extra to install."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingExtraError(module, extra, feature) from exc
