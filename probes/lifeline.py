"""A child process that dies with its parent (issue #50: SIGTERM to ``advisor probe`` left
``advisor.probes.child`` running, reparented to init).

The parent starts the child with :func:`start_child` (its pid in ``ADVISOR_PARENT_PID``); the
child calls :func:`die_with_parent` first thing. On Linux that asks the kernel for SIGKILL
when the parent goes (``prctl(PR_SET_PDEATHSIG)``), then checks that the parent has not
already gone in the moment before (its pid is not the parent's any more: it was reparented).

Why this and not the others: the kernel sends the signal however the parent ends -- SIGTERM
with no handler, SIGKILL, the out-of-memory killer, a crash -- where a process group needs
the parent alive to kill it, and it reaches a child stuck in native code or holding the GIL,
where a watchdog thread in the child needs the interpreter to run. Its one catch: the
"parent" is the *thread* that started the child, so a child must be started by a thread that
lives as long as the child is wanted, so :func:`start_child` starts every child from one
long-lived launcher thread (a service's request thread may end while the isolated worker it
started is still wanted). Elsewhere (not Linux) a daemon thread polls the parent's pid instead.

A Ctrl-C that lands while ``subprocess.Popen`` runs (after the fork, before it returns) would
leave a child that no caller holds, alive until the kernel's signal reaches it after the
parent's exit: in the launcher thread the start cannot be cut half-way, and a caller
interrupted while it waits kills and reaps the child it did not get.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

PARENT_ENV = "ADVISOR_PARENT_PID"
_PR_SET_PDEATHSIG = 1
_POLL_S = 1.0
_LAUNCHER: ThreadPoolExecutor | None = None  # its thread is not in a forked copy: a new one


def _forget_launcher() -> None:
    global _LAUNCHER
    _LAUNCHER = None


os.register_at_fork(after_in_child=_forget_launcher)


def child_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """The environment for a child that is to die with this process."""
    return {**(os.environ if env is None else env), PARENT_ENV: str(os.getpid())}


def start_child(command: list[str], **popen: Any) -> subprocess.Popen[Any]:
    """``subprocess.Popen(command, **popen)`` for a child that is to die with this process
    (``env`` passed through :func:`child_env`), started by the launcher thread; interrupted
    while it starts, the child is killed and reaped before the interruption goes on."""
    global _LAUNCHER
    if _LAUNCHER is None:
        _LAUNCHER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="advisor-launcher")
    popen["env"] = child_env(popen.get("env"))

    def popen_child() -> subprocess.Popen[Any]:
        return subprocess.Popen(command, **popen)

    start = _LAUNCHER.submit(popen_child)
    try:
        return start.result()
    except BaseException:
        with contextlib.suppress(Exception):
            proc = start.result(timeout=30)
            proc.kill()
            proc.wait(timeout=10)
        raise


def die_with_parent() -> None:
    """End this process when its parent ends (see the module). The variable is taken out of
    the environment, so this process's own children do not inherit a stale parent."""
    value = os.environ.pop(PARENT_ENV, "")
    expected = int(value) if value.isdigit() else None
    if sys.platform.startswith("linux") and _prctl_death_signal():
        if expected is not None and os.getppid() != expected:  # gone before the prctl
            os._exit(128 + signal.SIGKILL)
        return
    parent = expected if expected is not None else os.getppid()
    threading.Thread(target=_watch, args=(parent,), name="advisor-lifeline", daemon=True).start()


def _prctl_death_signal() -> bool:
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def _watch(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(_POLL_S)
    os._exit(128 + signal.SIGKILL)
