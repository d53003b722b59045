"""Run one probe in a separate process, with a timeout; failures come back as results.

:func:`run_probe` starts ``python -m advisor.probes.child``, sends it the request as JSON,
relays its progress events and reads the :class:`ProbeResult` from its last stdout line. A
separate process measures initialisation honestly (interpreter start, imports, model build)
and keeps an out-of-memory, a NaN loss, a crash or a hang from taking the advisor down.

What happened is classified where it is known, never guessed from log text: the child
reports an exception it caught by type in its result (oom, nan, timeout, error; see
:mod:`advisor.probes.framework`); the parent labels what the child could not report from
the exit status (``killed``: a signal ended it, named; ``error``: a non-zero exit code) and
its own timeout (``timeout``). A request's ``timeout_s`` is wall-clock seconds, as
``--timeout`` says (issue #50: it counted CPU time, so a builder that slept ran to three
times it). ``advisor suggest``'s own per-probe limit (not a ``--timeout``; its ``--timeout``
is a wall-clock deadline over everything) passes ``excuse_cpu_wait``: then the time the
child's main thread waited in the kernel's run queue for a busy CPU does not count (issue
#36: on a loaded machine probes ran past a wall-clock limit and the answer changed from run
to run), while time it sleeps or blocks does, and ``WALL_CAP`` times the limit ends it
whatever it did. A SIGKILL counts as out of memory only with evidence: the kernel's
``oom_kill`` counter (this cgroup's ``memory.events``/``memory.oom_control`` or
``/proc/vmstat``) rose while the probe ran. An interrupt (Ctrl-C) or any other exception in
the parent kills the child before it propagates; the child also dies with this process
however it ends (SIGTERM, SIGKILL: ``advisor.probes.lifeline``).
"""

from __future__ import annotations

import dataclasses
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
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
WALL_CAP = 3.0  # a prior: a child waiting for a busy CPU runs to at most this x its limit
POLL_S = 0.5  # how often the child's run-queue wait is read while its result is awaited


def child_cpu_wait_s(pid: int) -> float | None:
    """Seconds process ``pid``'s main thread has waited in the kernel's run queue for a CPU
    (``/proc/PID/schedstat``'s second field); None where it cannot be read."""
    try:
        return int(Path(f"/proc/{pid}/schedstat").read_text(encoding="ascii").split()[1]) / 1e9
    except (OSError, ValueError, IndexError):
        return None


def probe_time_left(
    wall_s: float, waited_s: float | None, timeout_s: float, excuse_cpu_wait: bool = False
) -> float:
    """Seconds left of a probe's ``timeout_s`` after ``wall_s`` of wall time: the wall time
    counts, or with ``excuse_cpu_wait`` the wall time less ``waited_s``, the time the child
    waited for a busy CPU (None: not known, all of it counts), and then the wall time at
    most ``WALL_CAP`` x ``timeout_s``."""
    if not excuse_cpu_wait:
        return timeout_s - wall_s
    used = wall_s - min(max(waited_s or 0.0, 0.0), wall_s)
    return min(timeout_s - used, WALL_CAP * timeout_s - wall_s)


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
    excuse_cpu_wait: bool = False,
) -> ProbeResult:
    """Run ``request`` in a child process and return its result; never raises for a failed
    probe (out of memory, NaN loss, crash, signal, timeout after ``request.timeout_s`` wall
    seconds; ``excuse_cpu_wait``: see the module).

    The child never outlives the call: on KeyboardInterrupt (or any exception) here it is
    killed and reaped before the exception propagates.
    """
    return run_probes([request], on_progress, python=python, excuse_cpu_wait=excuse_cpu_wait)[0]


PAST_DEADLINE = "the search's --timeout ran out before the probe finished"


def run_probes(
    requests: Sequence[ProbeRequest],
    on_progress: ProgressFn | None = None,
    on_start: Callable[[int], None] | None = None,
    python: str = sys.executable,
    on_result: Callable[[int, ProbeResult], None] | None = None,
    deadline: float | None = None,
    excuse_cpu_wait: bool = False,
) -> list[ProbeResult]:
    """Run ``requests`` in order in one child process (issue #28: the interpreter and the
    framework start once for several batch sizes) and return one result each, in order.
    ``deadline`` (a ``time.time()``; ``advisor suggest --timeout``, issue #36): the request
    running then fails as timed out and the later ones are not started (each request's own
    timeout counts from the previous result, so the batch could otherwise run for the sum).
    ``excuse_cpu_wait``: the time the child waits for a busy CPU does not count against a
    request's timeout (``advisor suggest``'s own limit; see the module).

    Each request keeps its own timeout (from the previous result on). A request the child
    cannot finish (a timeout, a crash, the out-of-memory killer) fails as ``run_probe``
    would say, and the requests after it run in a new child. ``on_start(i)`` hears when the
    i-th request begins, ``on_result(i, result)`` each result as soon as it is known (so an
    interrupt keeps what finished). The child never outlives the call.
    """
    if not requests:
        return []
    for request in requests:
        if request.framework not in FRAMEWORK_ENTRY:
            raise unknown_value_error("framework", request.framework, FRAMEWORK_ENTRY)
    start = time.time()
    # a fresh child's CPU clock starts at 0 (issue #36: its initialisation in CPU time too)
    first = dataclasses.replace(requests[0], process_start=start, process_cpu_start=0.0)
    batch = [first, *requests[1:]]
    oom_kills_before = oom_kill_count()
    proc: subprocess.Popen[str] | None = None
    results: queue.Queue[str | None] = queue.Queue()
    stderr: deque[str] = deque(maxlen=_STDERR_TAIL)
    done: list[ProbeResult] = []
    timed_out = False

    def progress(phase: str, n: int, total: int) -> None:
        if phase.startswith("start:"):
            if on_start is not None:
                on_start(int(phase.split(":", 1)[1]))
        elif on_progress is not None:
            on_progress(phase, n, total)

    from advisor.probes.lifeline import start_child

    try:
        proc = start_child(  # issue #50: dies with us, never left half-started by a Ctrl-C
            [python, "-m", "advisor.probes.child"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        readers = [
            threading.Thread(target=_read_results, args=(proc, results), daemon=True),
            threading.Thread(target=_read_stderr, args=(proc, stderr, progress), daemon=True),
        ]
        for reader in readers:
            reader.start()
        assert proc.stdin is not None
        payload = [json.loads(r.to_json()) for r in batch]
        try:
            proc.stdin.write(json.dumps(payload) if len(batch) > 1 else batch[0].to_json())
            proc.stdin.close()
        except BrokenPipeError:
            pass
        since, waited_since = start, 0.0
        while len(done) < len(batch):
            waited = child_cpu_wait_s(proc.pid) if excuse_cpu_wait else None
            waited = None if waited is None else waited - waited_since
            wait = probe_time_left(
                time.time() - since, waited, batch[len(done)].timeout_s, excuse_cpu_wait
            )
            if deadline is not None:
                wait = min(wait, deadline - time.time())
            if wait <= 0:
                timed_out = True
                break
            try:
                line = results.get(timeout=min(wait, POLL_S))
            except queue.Empty:
                continue
            if line is None:  # the child ended
                break
            result = _last_result([line])
            if result is not None:
                done.append(result)
                since = time.time()
                waited_since = (child_cpu_wait_s(proc.pid) or 0.0) if excuse_cpu_wait else 0.0
                if on_result is not None:
                    on_result(len(done) - 1, result)
        if not timed_out and len(done) < len(batch):
            proc.wait()
            for reader in readers:
                reader.join(timeout=5)
    finally:
        if proc is not None and proc.poll() is None:  # timed out, interrupted, or an error
            proc.kill()
            proc.wait()
    if len(done) == len(batch):
        return done
    failed = batch[len(done)]
    wall = time.time() - (start if not done else since)
    if timed_out:
        past = deadline is not None and time.time() >= deadline
        reason = (
            PAST_DEADLINE if past else f"the probe ran past its timeout of {failed.timeout_s:g} s"
        )
        done.append(ProbeResult.failure(failed, "timeout", reason, wall))
    else:
        assert proc is not None
        oom_kills = (oom_kills_before, oom_kill_count())
        status, reason = classify_exit(proc.returncode, list(stderr), oom_kills)
        done.append(ProbeResult.failure(failed, status, reason, wall))
    if on_result is not None:
        on_result(len(done) - 1, done[-1])
    rest = batch[len(done) :]
    if rest and deadline is not None and time.time() >= deadline:  # none started after it
        for request in rest:
            done.append(ProbeResult.failure(request, "timeout", PAST_DEADLINE, 0.0))
            if on_result is not None:
                on_result(len(done) - 1, done[-1])
        return done
    if rest:  # a new process for the requests the failed one left unrun
        offset = len(done)
        started = (lambda i: on_start(i + offset)) if on_start is not None else None
        noted = (lambda i, r: on_result(i + offset, r)) if on_result is not None else None
        done += run_probes(rest, on_progress, started, python, noted, deadline, excuse_cpu_wait)
    return done


def _read_results(proc: subprocess.Popen[str], out: queue.Queue[str | None]) -> None:
    """Each JSON result line of the child as it comes; None when its stdout closes."""
    assert proc.stdout is not None
    for line in proc.stdout:
        text = line.strip()
        if text.startswith("{"):
            out.put(text)
    out.put(None)


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
