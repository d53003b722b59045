"""The probe child process: ``python -m advisor.probes.child`` (started by ``run_probe``).

Reads one :class:`~advisor.probes.result.ProbeRequest` as JSON from stdin, runs the entry
point for its framework (:data:`advisor.probes.runner.FRAMEWORK_ENTRY`) and writes the
:class:`~advisor.probes.result.ProbeResult` JSON as the LAST line of stdout. Progress events
go to stderr as lines ``PROGRESS_PREFIX + {"phase": ..., "done": n, "total": m}``.
"""

from __future__ import annotations

import inspect
import json
import sys

from advisor.probes.result import ProbeRequest

PROGRESS_PREFIX = "@advisor-progress "


def _progress(phase: str, done: int, total: int) -> None:
    payload = json.dumps({"phase": phase, "done": done, "total": total})
    print(PROGRESS_PREFIX + payload, file=sys.stderr, flush=True)


def main() -> int:
    """Run one probe described on stdin; print its result as the last stdout line."""
    from advisor.probes.runner import resolve_entry

    request = ProbeRequest.from_json(sys.stdin.read())
    entry = resolve_entry(request.framework)
    if "on_progress" in inspect.signature(entry).parameters:
        result = entry(request, on_progress=_progress)
    else:
        result = entry(request)  # an entry point without progress reporting
    sys.stdout.flush()
    print(result.to_json(), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
