"""``advisor suggest --server URL``: the command's options as the service's request."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from advisor.errors import AdvisorError
from advisor.options import OPTIONS, SuggestOptions, request_body


def suggest_remote(
    server: str,
    token: str | None,
    options: SuggestOptions,
    space_text: str | None = None,
    backend: str | None = None,
    quiet: bool = False,
    progress: Callable[[str, int, int], None] | None = None,
    on_first_answer: Callable[[dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """Send the suggestion to ``server``, wait, return the report (as ``--json`` prints it);
    ``progress`` hears the job's progress as the service reports it (issue #50),
    ``on_first_answer`` the job's first answer when it has one (issue #46).

    What only this machine can do is refused in one line: its storage, threads, scoring back
    end, cloud probes and cloud settings."""
    from advisor.service.client import Client

    local_only = {
        name: getattr(options, name)
        for name, doc in OPTIONS.items()
        if not doc.service and name != "space"
    }
    local_only["threads"] = options.threads
    local_only["backend"] = backend
    for name, value in local_only.items():
        if value:
            flag = OPTIONS[name].flag if name in OPTIONS else f"--{name}"
            raise AdvisorError(
                f"{flag} has no meaning with --server (the service has its own).",
                f"drop {flag}, or run advisor suggest here.",
            )
    body = request_body(options, space_text)
    chatty = not quiet and sys.stderr.isatty()

    def retrying(what: str, wait_s: float) -> None:
        if chatty:
            print(f"{server}: {what}; retrying in {wait_s:.0f} s", file=sys.stderr)

    # Transient failures (503, the server restarting) are retried for up to RETRY_S per call.
    client = Client(server, token, on_retry=retrying)
    job_id = client.start_suggestion(body)
    if chatty:
        print(f"job {job_id} on {server}", file=sys.stderr)
    return client.wait(job_id, progress=progress, first_answer=on_first_answer)
