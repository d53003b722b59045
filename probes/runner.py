"""Run one probe in a separate process, with a timeout; failures come back as results.

:func:`run_probe` starts ``python -m advisor.probes.child``, sends it the request as JSON,
relays its progress events and reads the :class:`ProbeResult` from its last stdout line. A
separate process measures initialisation honestly (interpreter start, imports, model build)
and keeps an out-of-memory, a NaN loss, a crash or a hang from taking the advisor down.

What happened is classified where it is known, never guessed from log text: the child
reports an exception it caught by type in its result (oom, nan, timeout, error; see
:mod:`advisor.probes.framework`); the parent labels what the child could not report from
the exit status (``killed``: a signal ended it, named; ``error``: a non-zero exit code) and
its own timeout (``timeout``). A SIGKILL counts as out of memory only with evidence: the
kernel's ``oom_kill`` counter (this cgroup's ``memory.events``/``memory.oom_control`` or
``/proc/vmstat``) rose while the probe ran. An interrupt (Ctrl-C) or any other exception in
the parent kills the child before it propagates.
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
from pathlib import Path
from typing import Any

from advisor.probes.result import ProbeRequest, ProbeResult, ProbeStatus, one_line

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
    probe (out of memory, NaN loss, crash, signal, timeout after ``request.timeout_s``).

    The child never outlives the call: on KeyboardInterrupt (or any exception) here it is
    killed and reaped before the exception propagates.
    """
    if request.framework not in FRAMEWORK_ENTRY:
        raise unknown_value_error("framework", request.framework, FRAMEWORK_ENTRY)
    start = time.time()
    request = dataclasses.replace(request, process_start=start)
    oom_kills_before = oom_kill_count()
    proc: subprocess.Popen[str] | None = None
    try:
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
        for reader in readers:
            reader.join(timeout=0 if timed_out else 5)
    finally:
        if proc is not None and proc.poll() is None:  # timed out, interrupted, or an error
            proc.kill()
            proc.wait()
    wall = time.time() - start
    if timed_out:
        return ProbeResult.failure(
            request, "timeout", f"the probe ran past its timeout of {request.timeout_s:g} s", wall
        )
    result = _last_result(stdout)
    if result is not None:
        return result
    oom_kills = (oom_kills_before, oom_kill_count())
    return ProbeResult.failure(
        request, *classify_exit(proc.returncode, list(stderr), oom_kills), wall
    )


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


def classify_exit(
    returncode: int | None,
    stderr: list[str],
    oom_kills: tuple[int | None, int | None] = (None, None),
) -> tuple[ProbeStatus, str]:
    """Status and one-line reason for a child that left no result, from its exit status.

    ``oom_kills`` is the kernel's ``oom_kill`` count before and after the probe
    (:func:`oom_kill_count`); a SIGKILL is called out of memory only when it rose.
    """
    last = one_line(stderr[-1]) if stderr else "(no output)"
    if returncode is not None and returncode < 0:
        number = -returncode
        try:
            name = signal.Signals(number).name
        except ValueError:
            name = "unknown signal"
        reason = f"killed by signal {number} ({name})"
        before, after = oom_kills
        if number == signal.SIGKILL and before is not None and after is not None and after > before:
            return "oom", (
                f"{reason}; the kernel's out-of-memory killer acted while it ran "
                f"(oom_kill count {before} -> {after})"
            )
        return "killed", reason
    return "error", f"the probe process exited with code {returncode}: {last}"


def oom_kill_count() -> int | None:
    """The kernel's count of out-of-memory kills that can reach this process: the sum of its
    memory cgroup's ``oom_kill`` (v2 ``memory.events``, v1 ``memory.oom_control``) and the
    system's (``/proc/vmstat``); None where none of them can be read."""
    counts = [_read_counter(path, "oom_kill") for path in _oom_counter_files()]
    known = [c for c in counts if c is not None]
    return sum(known) if known else None


def _oom_counter_files() -> list[Path]:
    files = [Path("/proc/vmstat")]
    try:
        lines = Path("/proc/self/cgroup").read_text(encoding="utf-8").splitlines()
    except OSError:
        return files
    for line in lines:
        _, controllers, path = line.split(":", 2)
        rel = path.lstrip("/")
        if controllers == "":  # cgroup v2
            for base in (Path("/sys/fs/cgroup") / rel, Path("/sys/fs/cgroup")):
                if (base / "memory.events").exists():
                    files.append(base / "memory.events")
                    break
        elif "memory" in controllers.split(","):  # cgroup v1
            root = Path("/sys/fs/cgroup/memory")
            for base in (root / rel, root):  # inside a container the mount is its own root
                if (base / "memory.oom_control").exists():
                    files.append(base / "memory.oom_control")
                    break
    return files


def _read_counter(path: Path, key: str) -> int | None:
    try:
        for line in path.read_text(encoding="utf-8").splitlines():
            name, _, value = line.partition(" ")
            if name == key:
                return int(value)
    except (OSError, ValueError):
        return None
    return None
