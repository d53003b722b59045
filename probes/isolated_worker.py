"""The isolated worker process of ``advisor.probes.isolated`` (issue #50): its handle in the
caller (:class:`WorkerHandle`) and its loop (``python -m advisor.probes.isolated_worker
BUDGET``, :func:`serve`).

The wire: each call is one frame on the worker's stdin (the caller's ``sys.path``, working
directory and environment, then the pickled call, loaded once they are in place), each reply one frame on the
descriptor its stdout had when it started (a frame: 8 bytes of length, then a pickle). The
worker then points its stdout at its stderr, so what user code prints never mixes with the
replies; the caller keeps the last lines of that stderr for its error messages (with
``faulthandler``'s dump of a crash). Replies: ``("ready",)`` once the worker has imported
PyTorch and traced a built-in workload (the tracer's own first imports), then per call
``("ok", value)``, ``("raise", pickled exception or None, type name, message)``, ``("exit",
code)`` (``SystemExit``) or ``("memory", budget)`` (``MemoryError``);
the handle adds ``("timeout", s)``, ``("died", status, stderr tail, oom_kill counts)`` and
``("nostart", why)``.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import queue
import signal
import struct
import subprocess
import sys
import threading
import time
from collections import deque
from typing import IO, Any

STARTUP_TIMEOUT_S = 300.0  # the worker's own start (interpreter, PyTorch): not user code
FRAMEWORK_BYTES = 2**29  # data the framework takes after its import (threads, arenas)
_STDERR_TAIL = 40
_HEADER = struct.Struct(">Q")
_SERVING = False
Reply = tuple[Any, ...]


def serving() -> bool:
    """Whether this process is the worker (``advisor.probes.isolated`` then calls in place)."""
    return _SERVING


def read_frame(stream: IO[bytes]) -> bytes | None:
    """One frame's payload; None at the end of the stream (or a frame cut short)."""
    header = _read_exactly(stream, _HEADER.size)
    if header is None:
        return None
    (size,) = _HEADER.unpack(header)
    return _read_exactly(stream, size)


def _read_exactly(stream: IO[bytes], size: int) -> bytes | None:
    """``size`` bytes (a raw pipe may return fewer per read); None at the end."""
    parts, left = [], size
    while left > 0:
        part = stream.read(left)
        if not part:
            return None
        parts.append(part)
        left -= len(part)
    return b"".join(parts)


def frame(data: bytes) -> bytes:
    return _HEADER.pack(len(data)) + data


def write_frame(stream: IO[bytes], data: bytes) -> None:
    """``data`` as one frame on a raw (unbuffered) stream, which may take part of it at a time
    (a pipe's write cut short by a signal or a debugger's pause)."""
    view = memoryview(frame(data))
    while view:
        view = view[stream.write(view) or 0 :]


# -- in the caller ---------------------------------------------------------------------------


class WorkerHandle:
    """One worker process (started now), its replies as they come, the tail of its stderr."""

    def __init__(self, budget_bytes: int) -> None:
        from advisor.probes.lifeline import start_child
        from advisor.probes.runner import oom_kill_count

        command = [sys.executable, "-m", "advisor.probes.isolated_worker", str(budget_bytes)]
        self.replies: queue.Queue[Reply | None] = queue.Queue()
        self.stderr: deque[str] = deque(maxlen=_STDERR_TAIL)
        self.ready = False
        self.oom_kills = oom_kill_count()
        pipe = subprocess.PIPE  # unbuffered: no buffer lock held by a reader thread, which a
        # forked copy of this process would find held for good (``forget``)
        self.proc = start_child(command, bufsize=0, stdin=pipe, stdout=pipe, stderr=pipe)
        try:
            for target in (self._read_replies, self._read_stderr):
                threading.Thread(target=target, daemon=True, name="advisor-isolated").start()
        except BaseException:
            self.kill()
            raise

    def alive(self) -> bool:
        return self.proc.poll() is None

    def call(self, payload: bytes, timeout_s: float) -> Reply:
        """Send one call and wait for its reply, at most ``timeout_s`` once it is ready."""
        if not self.ready:  # the worker's start is not the user's code: its own time-out
            first = self._reply(STARTUP_TIMEOUT_S)
            if first[0] != "ready":
                tail = first[2] if first[0] == "died" else []
                last = tail[-1] if tail else f"no answer within {STARTUP_TIMEOUT_S:g} s"
                return ("nostart", " ".join(last.split())[:300])
            self.ready = True
        assert self.proc.stdin is not None
        try:
            write_frame(self.proc.stdin, payload)
        except OSError:  # it ended: its exit status
            return self._reply(5.0)
        return self._reply(timeout_s)

    def _reply(self, timeout_s: float) -> Reply:
        try:
            reply = self.replies.get(timeout=timeout_s)
        except queue.Empty:
            return ("timeout", timeout_s)
        if reply is not None:
            return reply
        try:
            code = self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.kill()
            code = self.proc.returncode
        time.sleep(0.05)  # the stderr reader's last lines
        from advisor.probes.runner import oom_kill_count

        return ("died", code, list(self.stderr), (self.oom_kills, oom_kill_count()))

    def _read_replies(self) -> None:
        assert self.proc.stdout is not None
        while True:
            data = read_frame(self.proc.stdout)
            if data is None:
                break
            try:
                self.replies.put(pickle.loads(data))
            except Exception as exc:  # a value pickled there that does not load here
                self.replies.put(("raise", None, type(exc).__name__, str(exc)))
        self.replies.put(None)

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        rest = b""
        while chunk := self.proc.stderr.read(65536):
            *lines, rest = (rest + chunk).split(b"\n")
            self._keep(lines)
        self._keep([rest])

    def _keep(self, lines: list[bytes]) -> None:
        for raw in lines:
            line = raw.decode("utf-8", "replace")
            if line.strip():
                self.stderr.append(line)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=10)

    def forget(self) -> None:
        """In a forked copy of the caller: close its copies of the pipes, leave the worker."""
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            with contextlib.suppress(OSError, ValueError):
                if stream is not None:
                    stream.close()  # raw pipes: no lock the caller's reader thread held

    def close(self) -> None:
        """Close its input (it exits); killed when it does not within 5 s."""
        with contextlib.suppress(OSError):
            if self.proc.stdin is not None:
                self.proc.stdin.close()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.kill()


# -- in the worker ---------------------------------------------------------------------------


def serve(budget_bytes: int) -> int:
    """The worker's loop: read calls from stdin, answer each on the descriptor stdout had at
    start, until stdin closes."""
    global _SERVING
    import faulthandler

    from advisor.probes.lifeline import die_with_parent

    die_with_parent()
    _SERVING = True
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the caller decides; it kills the worker
    replies = os.fdopen(os.dup(1), "wb", buffering=0)
    os.dup2(2, 1)  # what user code prints goes to stderr, never into the replies
    faulthandler.enable()
    with contextlib.suppress(Exception):  # before the first call's time-out starts: PyTorch
        # and what the tracer imports on its first trace (torch._dynamo: 2-8 s of CPU), by
        # tracing a built-in workload -- the advisor's own code, not the user's
        from advisor.probes.operators.torch_workload import trace_torch_workload

        trace_torch_workload("fcn", 1, mode="meta")
    cap = _cap_memory(budget_bytes)
    _send(replies, ("ready",))
    while True:
        data = read_frame(sys.stdin.buffer)
        if data is None:
            return 0
        _send(replies, _run(data, cap))


def _run(data: bytes, cap: int) -> Reply:
    try:
        (path, cwd, env), call = pickle.loads(data)
        sys.path[:] = path  # the caller's imports, working directory and environment
        os.chdir(cwd)
        os.environ.clear()
        os.environ.update(env)
        fn, args, kwargs = pickle.loads(call)  # its modules found as the caller finds them
        return ("ok", fn(*args, **kwargs))
    except SystemExit as exc:
        return ("exit", exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1))
    except MemoryError:
        return ("memory", cap)
    except BaseException as exc:  # the caller raises it again
        blob = None
        with contextlib.suppress(Exception):
            blob = pickle.dumps(exc, protocol=pickle.HIGHEST_PROTOCOL)
            pickle.loads(blob)  # one that cannot be rebuilt goes as its text
        if blob is not None and len(blob) > 2**20:
            blob = None
        return ("raise", blob, type(exc).__name__, " ".join(str(exc).split())[:500])


def _send(stream: IO[bytes], reply: Reply) -> None:
    try:
        data = pickle.dumps(reply, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception as exc:
        data = pickle.dumps(("raise", None, "PicklingError", f"its value cannot be sent: {exc}"))
    write_frame(stream, data)


def _cap_memory(budget_bytes: int) -> int:
    """Cap the data segment (``RLIMIT_DATA``) at what it holds now, plus what the framework
    takes after its import, plus ``budget_bytes`` (never above a limit this process was
    given: ``ulimit -d``); returns what user code may take under it (0: no cap was set)."""
    try:
        import resource

        now = _data_segment_bytes()
        cap = now + FRAMEWORK_BYTES + budget_bytes
        soft, hard = resource.getrlimit(resource.RLIMIT_DATA)
        for given in (soft, hard):
            if given != resource.RLIM_INFINITY:
                cap = min(cap, given)
        resource.setrlimit(resource.RLIMIT_DATA, (cap, hard))
        return max(cap - now - FRAMEWORK_BYTES, 0)
    except (ImportError, OSError, ValueError, AttributeError):
        return 0


def _data_segment_bytes() -> int:
    """This process's data segment now (``VmData``; 0 where it cannot be read)."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmData:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    return 0


if __name__ == "__main__":
    from advisor.probes import isolated_worker  # the named module (``-m`` runs a copy)

    sys.exit(isolated_worker.serve(int(sys.argv[1]) if len(sys.argv) > 1 else 0))
