"""The probe child process: ``python -m advisor.probes.child`` (started by ``run_probe``).

Reads one :class:`~advisor.probes.result.ProbeRequest` as JSON from stdin (or a JSON list of
them, run in order: one process for several batch sizes, issue #28), runs its framework's
runner (:data:`advisor.probes.runner.FRAMEWORK_ENTRY`) and writes each
:class:`~advisor.probes.result.ProbeResult` as one JSON line of stdout, in order. A later
probe of a shared process counts the interpreter start and imports measured for the first
in its initialisation (they happen once per run of a job too) and records that it shared the
process (``fingerprint["probe_process"]``); its peak memory is its own. A failure the
runner could not report itself (the framework does not import, say) is still written as a
result, classified by exception type; only what kills the process (a signal, ``os._exit``)
is left to the parent, which reads the exit status. Progress events go to stderr as lines
``PROGRESS_PREFIX + {"phase": ..., "done": n, "total": m}``. It dies with the process that
started it (``advisor.probes.lifeline``).
"""

from __future__ import annotations

import dataclasses
import json
import sys
import time

from advisor.probes.result import ProbeRequest, ProbeResult, one_line

PROGRESS_PREFIX = "@advisor-progress "


def _progress(phase: str, done: int, total: int) -> None:
    payload = json.dumps({"phase": phase, "done": done, "total": total})
    print(PROGRESS_PREFIX + payload, file=sys.stderr, flush=True)


def main() -> int:
    """Run the probes described on stdin (one request, or a JSON list of them run in order);
    print each result as one stdout line, in order, as soon as it is known."""
    from advisor.probes.lifeline import die_with_parent

    die_with_parent()  # issue #50: never left running when the advisor is stopped
    text = sys.stdin.read()
    data = json.loads(text)
    requests = (
        [ProbeRequest(**r) for r in data] if isinstance(data, list) else [ProbeRequest(**data)]
    )
    imports: tuple[float, float] | None = None  # (wall, CPU) seconds
    for position, request in enumerate(requests):
        if position > 0:  # issue #28: one process for several batch sizes
            assert imports is not None
            request = shared_process(request, *imports)
        _progress(f"start:{position}", position, len(requests))
        result, imports = _run(request, imports)
        if position > 0:
            result = dataclasses.replace(
                result,
                fingerprint={
                    **result.fingerprint,
                    "probe_process": {"position": position, "imports_s": round(imports[0], 4)},
                },
            )
        sys.stdout.flush()
        print(result.to_json(), flush=True)
    return 0


def shared_process(
    request: ProbeRequest, imports_s: float, imports_cpu: float = 0.0
) -> ProbeRequest:
    """A later request of a shared process: its initialisation starts ``imports_s`` (the
    interpreter start and imports this process measured for its first probe) before now, so
    ``init_s`` is still interpreter + imports + this batch's build, each measured; on the CPU
    clock likewise, ``imports_cpu`` before now (issue #36)."""
    from advisor.probes.host import reset_peak_rss

    reset_peak_rss()  # its peak memory is its own, not an earlier batch size's
    return dataclasses.replace(
        request,
        process_start=time.time() - imports_s,
        process_cpu_start=time.process_time() - imports_cpu,
    )


def _run(
    request: ProbeRequest, imports: tuple[float, float] | None
) -> tuple[ProbeResult, tuple[float, float]]:
    """One probe; returns its result and the interpreter-and-import time, wall and CPU
    (measured on the first: process start until the framework's runner is imported)."""
    from advisor.probes.framework import classify
    from advisor.probes.runner import resolve_entry

    started = request.process_start if request.process_start is not None else time.time()
    cpu_start = request.process_cpu_start or 0.0
    try:
        entry = resolve_entry(request.framework)
        if imports is None:
            imports = (time.time() - started, time.process_time() - cpu_start)
        result = entry(request, on_progress=_progress)
    except Exception as exc:  # what the runner could not turn into a result itself
        reason = one_line(f"{type(exc).__name__}: {exc}")
        result = ProbeResult.failure(request, classify(exc), reason, time.time() - started)
    if imports is None:
        imports = (time.time() - started, time.process_time() - cpu_start)
    return result, imports


if __name__ == "__main__":
    sys.exit(main())
