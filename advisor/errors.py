"""User-facing errors: one line saying what is wrong and how to fix it."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class AdvisorError(Exception):
    """An error caused by the user's input or environment, not by a bug.

    The CLI prints ``str(error)`` on one line and exits with code 2, never a traceback.
    ``fix`` says what to do about it ("To fix: ...").
    """

    def __init__(self, problem: str, fix: str | None = None) -> None:
        self.problem = problem
        self.fix = fix
        super().__init__(f"{problem} To fix: {fix}" if fix else problem)


class Terminated(KeyboardInterrupt):
    """The process was asked to stop (SIGTERM): handled like Ctrl-C (the trial in progress is
    abandoned, finished trials are kept and reported), but the exit status is 143."""


class MissingExtraError(AdvisorError):
    """An optional dependency (an extra) is needed for this feature but not installed."""

    def __init__(self, module: str, extra: str, feature: str) -> None:
        super().__init__(
            f"{feature} needs the '{module}' package, which is not installed.",
            f"pip install 'advisor[{extra}]'",
        )


def close_matches(word: str, choices: Iterable[str], n: int = 3) -> list[str]:
    """Return up to ``n`` choices that look like ``word`` (for "did you mean" hints)."""
    choices = list(choices)
    lowered = {c.lower(): c for c in choices}
    hits = difflib.get_close_matches(word.lower(), list(lowered), n=n, cutoff=0.5)
    return [lowered[h] for h in hits]


def unknown_value_error(kind: str, value: str, valid: Iterable[str]) -> AdvisorError:
    """An error for a value that is not one of ``valid``, naming close matches and all options."""
    valid = sorted(set(valid))
    near = close_matches(value, valid)
    hint = f" Did you mean {', '.join(near)}?" if near else ""
    return AdvisorError(f"Unknown {kind} '{value}'.{hint}", f"use one of: {', '.join(valid)}.")
