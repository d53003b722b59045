"""Whether an existing study answers the same question as this command.

A study's name comes from its inputs (``advisor.study.naming``), so a re-run resumes it; a
name given with ``--study-name`` may instead be one another question used (another workload,
objective, space or limits). Resuming it would report the other question's trials under this
command's header, so the attributes the study was created with (``study_attrs``) must match.
"""

from __future__ import annotations

import json
from typing import Any

from advisor.errors import AdvisorError

# Attributes that may differ between runs of the same question: the scoring back end (a
# service worker joins with its own), and the limits -- a named study may go on under
# another budget or deadline (the service adds trials to a team's study that way); each
# trial keeps what it was judged against.
IGNORED = frozenset({"backend", "budget_usd", "deadline_s"})
SHOWN = {
    "workload": "workload",
    "framework": "framework",
    "objective": "objective",
    "space": "search space",
    "catalog_snapshot": "catalog snapshot",
    "epochs": "epochs",
    "at_batch": "--at-batch",
    "epochs_at": "--epochs-at",
    "n_train": "training samples",
    "n_val": "validation samples",
}


def _same(a: Any, b: Any) -> bool:
    return json.dumps(a, sort_keys=True, default=str) == json.dumps(b, sort_keys=True, default=str)


def check_same_question(name: str, stored: dict[str, Any], wanted: dict[str, Any]) -> None:
    """Raise AdvisorError when study ``name`` (its ``stored`` user attributes) was created for
    another question than ``wanted`` (``study_attrs`` of this command). Attributes the study
    does not have (an older study) are not compared."""
    differ = [
        k for k, v in wanted.items() if k in stored and k not in IGNORED and not _same(stored[k], v)
    ]
    if not differ:
        return
    first = differ[0]
    what = ", ".join(SHOWN.get(k, k) for k in differ)
    detail = ""
    if first in ("workload", "framework", "objective"):
        detail = f" (it has {first} {stored[first]}, this command {wanted[first]})"
    raise AdvisorError(
        f"Study '{name}' was made for another question: its {what} "
        f"{'differs' if len(differ) == 1 else 'differ'}{detail}.",
        "pass another --study-name (or leave it out: the name then follows the inputs), or "
        "repeat the command that made the study.",
    )
