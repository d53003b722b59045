"""User code at arm's length: a function called in one reusable child process (issue #50).

A user's ``--model module:function`` is run to trace its step, time its DataLoader and read
its dataset sizes. In the advisor's own process a ``sys.exit(3)`` in the builder ended the
advisor silently with that code, a segfault took it down and a ``time.sleep`` in ``forward``
hung ``advisor predict`` for good. :func:`call_isolated` runs ``fn(*args, **kwargs)`` -- a
picklable top-level function -- in a worker process instead and returns its value or raises
its exception; what the worker cannot report becomes one :class:`UserCodeError` line naming
``what`` ran and the fix:

- an exit (``sys.exit``, ``os._exit``), a crash (a signal; its innermost frame from
  ``faulthandler`` named), the kernel's out-of-memory killer (its ``oom_kill`` count rose);
- a hang: the call's wall-clock time-out (``timeout_s``, else :func:`time_limit`'s, else
  ``DEFAULT_TIMEOUT_S``; never past its deadline) kills the worker;
- a runaway allocation: the worker's data segment is capped (``RLIMIT_DATA``, sized from the
  memory this machine has available when it starts, :func:`memory_budget_bytes`), so it
  raises ``MemoryError`` there instead of the kernel killing a process of its choosing.
  ``RLIMIT_DATA``, not ``RLIMIT_AS``: address space that is only reserved (glibc's arenas,
  CUDA's unified address space) does not count against it, memory written to does.

Speed: tracing is on the path of every ``suggest`` and ``predict``, so the worker is started
once (lazily, or early by :func:`prestart`), imports PyTorch and the tracer, and is reused
for every call; a call's time-out counts from when the worker is ready. A broken worker (an exit, a crash, a
time-out) is replaced by the next call. Calls are serialised per worker: one worker (slot 0)
takes every call but those :func:`call_isolated_each` makes side by side, one worker per slot
(at most ``SLOTS``, one per CPU this process may use): a deep model's two shallow traces
(``advisor.probes.operators.layer_scaling``), whose worker is then the same for each depth, so
what a worker keeps between calls (the FSDP traces by rank count) stays whole. Each call carries
the caller's ``sys.path``, working directory and environment, so the user's module imports in
the worker as it would here. What the user's code prints goes to the worker's stderr, kept
for the error message (the process and its wire: :mod:`advisor.probes.isolated_worker`). It
dies with this process (:mod:`advisor.probes.lifeline`), and ignores Ctrl-C (the caller kills
it when interrupted).
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import pickle
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from advisor.probes.isolated_worker import Reply, WorkerHandle, serving

from advisor.errors import AdvisorError

T = TypeVar("T")
DEFAULT_TIMEOUT_S = 300.0  # as `advisor probe --timeout`'s default
MEMORY_FRACTION = 0.8  # of the memory available when the worker starts

_LIMIT: contextvars.ContextVar[tuple[float | None, float | None]] = contextvars.ContextVar(
    "advisor_isolated_limit", default=(None, None)
)


class UserCodeError(AdvisorError):
    """User code ended, crashed, hung or ran out of memory in the worker: one line naming
    what ran and the fix. ``kind``: exit, signal, timeout or memory."""

    def __init__(self, problem: str, fix: str, kind: str) -> None:
        super().__init__(problem, fix)
        self.kind = kind

    def __reduce__(self) -> Any:
        return (UserCodeError, (self.problem, self.fix or "", self.kind))


def in_worker() -> bool:
    """Whether this process is the worker (a call here runs in place)."""
    return serving()


@contextlib.contextmanager
def time_limit(timeout_s: float | None = None, deadline: float | None = None) -> Iterator[None]:
    """Calls made within get ``timeout_s`` wall seconds each (``--timeout``) and none past
    ``deadline`` (a ``time.time()``: ``advisor suggest --timeout``'s end), unless the call
    gives its own ``timeout_s`` (then the deadline still bounds it)."""
    token = _LIMIT.set((timeout_s, deadline))
    try:
        yield
    finally:
        _LIMIT.reset(token)


def call_isolated(
    fn: Callable[..., T],
    /,
    *args: Any,
    timeout_s: float | None = None,
    what: str = "user code",
    **kwargs: Any,
) -> T:
    """``fn(*args, **kwargs)`` in the worker process (see the module): its value, or its
    exception raised here; a :class:`UserCodeError` when the worker could not answer (an
    exit, a crash, out of memory, or past the time-out, wall seconds). ``what`` names the
    code in that error ("--model m:f's builder, traced at batch 32")."""
    if serving():
        return fn(*args, **kwargs)
    limit = _timeout(timeout_s)
    return _answer(_call_in(0, fn, args, kwargs, limit), what, limit)


def call_isolated_each(
    calls: list[tuple[Callable[..., T], tuple[Any, ...], dict[str, Any]]],
    *,
    timeout_s: float | None = None,
    what: str = "user code",
) -> list[T]:
    """``[fn(*args, **kwargs) for fn, args, kwargs in calls]``, the i-th call in worker slot
    ``i`` and all of them side by side where this process may use several CPUs (``slots``),
    else one after the other in slot 0; raises as :func:`call_isolated` does (the first
    failing call's error, once all have ended)."""
    if serving():
        return [fn(*args, **kwargs) for fn, args, kwargs in calls]
    limit = _timeout(timeout_s)
    if slots() < 2 or len(calls) < 2:
        return [_answer(_call_in(0, fn, a, kw, limit), what, limit) for fn, a, kw in calls]
    replies: list[Reply | BaseException | None] = [None] * len(calls)

    def run(i: int) -> None:
        fn, args, kwargs = calls[i]
        try:
            replies[i] = _call_in(i % slots(), fn, args, kwargs, limit)
        except BaseException as exc:  # raised in the caller's thread below
            replies[i] = exc

    threads = [threading.Thread(target=run, args=(i,), daemon=True, name=f"advisor-isolated-{i}")
               for i in range(len(calls))]  # fmt: skip
    for t in threads:
        t.start()
    try:
        for t in threads:
            while t.is_alive():  # a short join: Ctrl-C reaches the caller while it waits
                t.join(0.2)
    except BaseException:  # interrupted: the calls in flight are abandoned with their workers
        for slot in range(min(len(calls), slots())):
            _discard_slot(slot)
        raise
    for reply in replies:
        if isinstance(reply, BaseException):
            raise reply
    return [_answer(reply, what, limit) for reply in replies if reply is not None]


def slots() -> int:
    """How many workers :func:`call_isolated_each` uses: ``SLOTS``, or fewer where this process
    may use fewer CPUs."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cpus = os.cpu_count() or 1
    return max(1, min(SLOTS, cpus))


def prestart(count: int = 1) -> None:
    """Start the first ``count`` workers now (at most ``slots``; in the background) so that
    their imports overlap the caller's."""
    if serving():
        return
    for slot in range(max(1, min(count, slots()))):
        with _lock(slot):
            if _WORKERS.get(slot) is None or not _WORKERS[slot].alive():
                _WORKERS[slot] = _start()


def shutdown() -> None:
    """Stop the workers (each exits when its input closes; killed if it does not)."""
    for slot in list(_WORKERS):
        with _lock(slot):
            worker = _WORKERS.pop(slot, None)
            if worker is not None:
                worker.close()


def memory_budget_bytes() -> int:
    """What user code may allocate in the worker: ``MEMORY_FRACTION`` of the memory this
    machine has available now (read when the worker starts)."""
    from advisor.probes.operators.feasibility import available_memory_bytes

    return int(MEMORY_FRACTION * available_memory_bytes())


SLOTS = 2  # workers side by side at most (a deep model's two shallow traces)
_LOCKS: dict[int, threading.RLock] = {}
_WORKERS: dict[int, WorkerHandle] = {}
_GUARD = threading.Lock()  # makes each slot's lock once
_AT_EXIT = False


def _lock(slot: int) -> threading.RLock:
    with _GUARD:
        return _LOCKS.setdefault(slot, threading.RLock())


def _call_in(
    slot: int, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any], limit: float
) -> Reply:
    """One call in the worker of ``slot`` (started if it is not running); its reply."""
    call = pickle.dumps((fn, args, kwargs), protocol=pickle.HIGHEST_PROTOCOL)
    context = (list(sys.path), os.getcwd(), dict(os.environ))  # applied before ``call`` loads
    payload = pickle.dumps((context, call), protocol=pickle.HIGHEST_PROTOCOL)
    with _lock(slot):
        worker = _WORKERS.get(slot)
        if worker is None or not worker.alive():
            worker = _WORKERS[slot] = _start()
        try:
            reply = worker.call(payload, limit)
        except BaseException:  # interrupted, or the reply could not be read: never reused
            _discard(slot, worker)
            raise
        if reply[0] != "ok" and reply[0] != "raise":
            _discard(slot, worker)
    return reply


def _forget_after_fork() -> None:
    """A forked copy of this process (a service's job) has neither the workers' reader
    threads nor their locks' holders: it starts workers of its own when it needs them."""
    global _GUARD
    for worker in _WORKERS.values():
        worker.forget()
    _WORKERS.clear()
    _LOCKS.clear()
    _GUARD = threading.Lock()


os.register_at_fork(after_in_child=_forget_after_fork)


def _timeout(timeout_s: float | None) -> float:
    default, deadline = _LIMIT.get()
    limit = timeout_s if timeout_s is not None else default
    limit = DEFAULT_TIMEOUT_S if limit is None else limit
    if deadline is not None:
        limit = min(limit, deadline - time.time())
    return max(limit, 0.1)


def _start() -> WorkerHandle:
    global _AT_EXIT
    if not _AT_EXIT:
        import atexit

        atexit.register(shutdown)
        _AT_EXIT = True
    return WorkerHandle(memory_budget_bytes())


def _discard(slot: int, worker: WorkerHandle) -> None:
    worker.kill()
    if _WORKERS.get(slot) is worker:
        del _WORKERS[slot]


def _discard_slot(slot: int) -> None:
    """Kill the worker of ``slot`` whatever it is doing (its caller was interrupted); its lock
    is not taken: the call in flight holds it, and ends when the worker's pipes close."""
    worker = _WORKERS.get(slot)
    if worker is not None:
        _discard(slot, worker)


def _answer(reply: Reply, what: str, timeout_s: float) -> Any:
    kind = reply[0]
    if kind == "ok":
        return reply[1]
    if kind == "raise":
        _, blob, name, message = reply
        error: BaseException | None = None
        if blob is not None:
            with contextlib.suppress(Exception):
                error = pickle.loads(blob)
        raise error if isinstance(error, BaseException) else RuntimeError(f"{name}: {message}")
    if kind == "exit":
        raise UserCodeError(
            f"{what} ended the process it ran in with exit code {reply[1]} (sys.exit or "
            "os._exit in the model's code).",
            "let the builder return its setup, or raise an exception, instead of exiting.",
            "exit",
        )
    if kind == "nostart":
        raise AdvisorError(
            f"The process that runs {what} apart from the advisor could not start ({reply[1]}).",
            f"check that `{sys.executable} -m advisor.probes.isolated` runs here.",
        )
    if kind == "memory":
        budget = f"the {reply[1] / 2**30:.1f} GiB " if reply[1] else "the memory "
        raise UserCodeError(
            f"{what} ran out of memory: it asked for more than {budget}this machine had "
            "available (MemoryError).",
            "build a smaller model or dataset, or use a smaller --batch-size.",
            "memory",
        )
    if kind == "timeout":
        raise UserCodeError(
            f"{what} did not finish within {timeout_s:g} s (wall clock): it sleeps, waits "
            "or runs for very long.",
            "fix the code that waits, or give a longer --timeout.",
            "timeout",
        )
    return _died(reply, what)


def _died(reply: Reply, what: str) -> Any:
    from advisor.probes.runner import classify_exit

    _, code, tail, oom_kills = reply
    where = _innermost_frame(tail)
    if code is not None and code >= 0:
        raise UserCodeError(
            f"{what} ended the process it ran in with exit code {code} (sys.exit or "
            f"os._exit in the model's code){where}.",
            "let the builder return its setup, or raise an exception, instead of exiting.",
            "exit",
        )
    status, reason = classify_exit(code, [], oom_kills)
    if status == "oom":
        raise UserCodeError(
            f"{what} ran out of memory: {reason}.",
            "build a smaller model or dataset, or use a smaller --batch-size.",
            "memory",
        )
    raise UserCodeError(
        f"{what} crashed the process it ran in: {reason}{where}.",
        "run the builder and one training step in plain Python to find the crash "
        "(a C extension, ctypes or a native library).",
        "signal",
    )


def _innermost_frame(tail: list[str]) -> str:
    """``faulthandler``'s innermost frame of the user's code (``File "x.py", line 3 in f``:
    not Python's own library, an installed package or the advisor), as ``; in ...``."""
    import sysconfig

    paths = sysconfig.get_paths()
    advisor_file = sys.modules[AdvisorError.__module__].__file__ or __file__
    ours = (os.path.dirname(os.path.abspath(f)) for f in (__file__, advisor_file))
    skip = tuple(
        os.path.join(p, "") for p in {paths["stdlib"], paths["purelib"], paths["platlib"], *ours}
    )
    frames = []
    first = next((i + 1 for i, t in enumerate(tail) if "most recent call first" in t), len(tail))
    for line in tail[first:]:
        text = " ".join(line.split())
        if not text.startswith("File "):
            break
        frames.append(text)
    for text in frames:
        name = text.split('"')[1] if text.count('"') >= 2 else ""
        if not os.path.abspath(name).startswith(skip):
            return f"; in {text}"
    return f"; in {frames[0]}" if frames else ""
