"""``advisor suggest --server URL``: turn the command's options into the service's request."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from advisor.errors import AdvisorError


def suggest_remote(server: str, token: str | None, opts: dict[str, Any]) -> dict[str, Any]:
    """Send the suggestion to ``server``, wait, return the report (as ``--json`` prints it)."""
    from advisor.service.client import Client

    for name, option in (
        ("storage", "storage"),
        ("threads", "threads"),
        ("backend_spec", "backend"),
    ):
        if opts.get(name) is not None:
            raise AdvisorError(
                f"--{option} has no meaning with --server (the service has its own).",
                f"drop --{option}.",
            )
    body: dict[str, Any] = {
        "model": opts["model"],
        "framework": opts["framework"],
        "budget_usd": opts["budget"],
        "deadline_s": opts["deadline"],  # seconds: the CLI's Duration type parsed it
        "objective": opts["objective"],
        "probe_budget_usd": opts["probe_budget"],
        "epochs": opts["epochs"],
        "at_batch": opts.get("at_batch"),
        "epochs_at": [list(pair) for pair in opts.get("epochs_at") or ()],  # issue #19
        "sampler": opts["sampler"],
        "seed": opts["seed"],
        "trials": opts["trials"],
        "timeout_s": opts["timeout_"],
        "snapshot": opts["snapshot"],
        "study_name": opts["study_name"],
        "probe_iterations": opts["probe_iterations"],
        "n_train": opts["n_train"],
        "n_val": opts["n_val"],
        "data_gb": opts.get("data_gb"),  # issue #14
        "screen": not opts["no_screen"],
    }
    if opts.get("space_file"):
        try:
            body["space"] = Path(opts["space_file"]).read_text()
        except OSError as exc:
            raise AdvisorError(
                f"Cannot read {opts['space_file']} ({exc}).", "fix --space."
            ) from exc
    body = {k: v for k, v in body.items() if v is not None}
    chatty = not opts.get("as_json") and sys.stderr.isatty()

    def retrying(what: str, wait_s: float) -> None:
        if chatty:
            print(f"{server}: {what}; retrying in {wait_s:.0f} s", file=sys.stderr)

    # Transient failures (503, the server restarting) are retried for up to RETRY_S per call.
    client = Client(server, token, on_retry=retrying)
    job_id = client.start_suggestion(body)
    if chatty:
        print(f"job {job_id} on {server}", file=sys.stderr)
    return client.wait(job_id)
