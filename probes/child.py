"""The probe child process: ``python -m advisor.probes.child`` (started by ``run_probe``).

Reads one :class:`~advisor.probes.result.ProbeRequest` as JSON from stdin, runs its
framework's runner (:data:`advisor.probes.runner.FRAMEWORK_ENTRY`) and writes the
:class:`~advisor.probes.result.ProbeResult` JSON as the LAST line of stdout. A failure the
runner could not report itself (the framework does not import, say) is still written as a
result, classified by exception type; only what kills the process (a signal, ``os._exit``)
is left to the parent, which reads the exit status. Progress events go to stderr as lines
``PROGRESS_PREFIX + {"phase": ..., "done": n, "total": m}``.
"""

from __future__ import annotations

import json
import sys
import time

from advisor.probes.result import ProbeRequest, ProbeResult, one_line

PROGRESS_PREFIX = "@advisor-progress "


def _progress(phase: str, done: int, total: int) -> None:
    payload = json.dumps({"phase": phase, "done": done, "total": total})
    print(PROGRESS_PREFIX + payload, file=sys.stderr, flush=True)


def main() -> int:
    """Run one probe described on stdin; print its result as the last stdout line."""
    from advisor.probes.framework import classify
    from advisor.probes.runner import resolve_entry

    request = ProbeRequest.from_json(sys.stdin.read())
    started = request.process_start if request.process_start is not None else time.time()
    try:
        result = resolve_entry(request.framework)(request, on_progress=_progress)
    except Exception as exc:  # what the runner could not turn into a result itself
        reason = one_line(f"{type(exc).__name__}: {exc}")
        result = ProbeResult.failure(request, classify(exc), reason, time.time() - started)
    sys.stdout.flush()
    print(result.to_json(), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
