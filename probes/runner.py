"""Run one probe in a separate process, with a timeout; failures come back as results.

:func:`run_probe` starts ``python -m advisor.probes.child``, sends it the request as JSON,
relays its progress events and reads the :class:`ProbeResult` from its last stdout line. A
separate process measures initialisation honestly (interpreter start, imports, model build)
and keeps an out-of-memory, a NaN loss, a crash or a hang from taking the advisor down: each
becomes a ProbeResult with status ``oom``, ``nan``, ``error`` or ``timeout`` and the reason.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from advisor.probes.result import ProbeRequest, ProbeResult, ProbeStatus

from advisor.errors import unknown_value_error

FRAMEWORK_ENTRY: dict[str, str] = {
    "torch": "advisor.probes.torch_runner:probe_in_process",
    "keras": "advisor.probes.keras_runner:probe_in_process",
}
ProgressFn = Callable[[str, int, int], None]  # (phase, done, total)
PROGRESS_PREFIX = "@advisor-progress "  # same as advisor.probes.child.PROGRESS_PREFIX
_STDERR_TAIL = 40


def resolve_entry(framework: str) -> Callable[..., ProbeResult]:
    """The ``probe_in_process`` function for ``framework`` (imports the framework)."""
    from advisor.search_spaces.workloads import load_callable

    if framework not in FRAMEWORK_ENTRY:
        raise unknown_value_error("framework", framework, FRAMEWORK_ENTRY)
    return load_callable(FRAMEWORK_ENTRY[framework])


def run_probe(
    request: ProbeRequest,
    on_progress: ProgressFn | None = None,
    python: str = sys.executable,
) -> ProbeResult:
    """Run ``request`` in a child process and return its result; never raises for a failed
    probe (out of memory, NaN loss, crash, timeout after ``request.timeout_s``)."""
    if request.framework not in FRAMEWORK_ENTRY:
        raise unknown_value_error("framework", request.framework, FRAMEWORK_ENTRY)
    start = time.time()
    request = dataclasses.replace(request, process_start=start)
    proc = subprocess.Popen(
        [python, "-m", "advisor.probes.child"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    stdout: list[str] = []
    stderr: deque[str] = deque(maxlen=_STDERR_TAIL)
    readers = [
        threading.Thread(target=_read_stdout, args=(proc, stdout), daemon=True),
        threading.Thread(target=_read_stderr, args=(proc, stderr, on_progress), daemon=True),
    ]
    for reader in readers:
        reader.start()
    assert proc.stdin is not None
    try:
        proc.stdin.write(request.to_json())
        proc.stdin.close()
    except BrokenPipeError:
        pass
    timed_out = False
    try:
        proc.wait(timeout=request.timeout_s)
    except subprocess.TimeoutExpired:
        timed_out = True
        proc.kill()
        proc.wait()
    for reader in readers:
        reader.join(timeout=5)
    wall = time.time() - start
    if timed_out:
        return ProbeResult.failure(
            request, "timeout", f"the probe ran past its timeout of {request.timeout_s:g} s", wall
        )
    result = _last_result(stdout)
    if result is not None:
        return result
    return ProbeResult.failure(request, *_classify(proc.returncode, list(stderr)), wall)


def _read_stdout(proc: subprocess.Popen[str], out: list[str]) -> None:
    assert proc.stdout is not None
    for line in proc.stdout:
        out.append(line.rstrip("\n"))


def _read_stderr(
    proc: subprocess.Popen[str], tail: deque[str], on_progress: ProgressFn | None
) -> None:
    assert proc.stderr is not None
    for line in proc.stderr:
        line = line.rstrip("\n")
        if line.startswith(PROGRESS_PREFIX):
            if on_progress is not None:
                try:
                    event = json.loads(line[len(PROGRESS_PREFIX) :])
                    on_progress(str(event["phase"]), int(event["done"]), int(event["total"]))
                except (ValueError, KeyError):
                    pass
            continue
        if line.strip():
            tail.append(line)


def _last_result(lines: list[str]) -> ProbeResult | None:
    for line in reversed(lines):
        text = line.strip()
        if not text.startswith("{"):
            continue
        try:
            data: Any = json.loads(text)
            return ProbeResult.from_dict(data)
        except (ValueError, TypeError):
            continue
    return None


def _classify(returncode: int | None, stderr: list[str]) -> tuple[ProbeStatus, str]:
    text = "\n".join(stderr)
    last = stderr[-1] if stderr else "(no output)"
    if "MemoryError" in text or "out of memory" in text.lower():
        return "oom", last
    if returncode == -signal.SIGKILL:
        return "oom", "the probe process was killed (SIGKILL), probably by the out-of-memory killer"
    if returncode is not None and returncode < 0:
        return "error", f"the probe process died from signal {-returncode}: {last}"
    if "non-finite" in text.lower() or "LossDiverged" in text:
        return "nan", last
    return "error", f"the probe process exited with code {returncode}: {last}"
