"""A child process that dies with its parent (issue #50: SIGTERM to ``advisor probe`` left
``advisor.probes.child`` running, reparented to init).

The parent starts the child with :func:`child_env` (its pid in ``ADVISOR_PARENT_PID``); the
child calls :func:`die_with_parent` first thing. On Linux that asks the kernel for SIGKILL
when the parent goes (``prctl(PR_SET_PDEATHSIG)``), then checks that the parent has not
already gone in the moment before (its pid is not the parent's any more: it was reparented).

Why this and not the others: the kernel sends the signal however the parent ends -- SIGTERM
with no handler, SIGKILL, the out-of-memory killer, a crash -- where a process group needs
the parent alive to kill it, and it reaches a child stuck in native code or holding the GIL,
where a watchdog thread in the child needs the interpreter to run. Its one catch: the
"parent" is the *thread* that started the child, so a child must be started by a thread that
lives as long as the child is wanted (a probe's caller waits for it; the isolated worker is
started by a long-lived launcher thread, ``advisor.probes.isolated``). Elsewhere (not Linux) a
daemon thread polls the parent's pid instead.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time

PARENT_ENV = "ADVISOR_PARENT_PID"
_PR_SET_PDEATHSIG = 1
_POLL_S = 1.0


def child_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """The environment for a child that is to die with this process."""
    return {**(os.environ if env is None else env), PARENT_ENV: str(os.getpid())}


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
