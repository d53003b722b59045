"""Writes that ride out a short storage outage in place, where the caller asks for it.

A finished probe or trial is written once; when the database is restarting at that moment
the write fails and, without more, the work behind it is lost with the run. A caller that
can wait (the service's jobs, under a lease) installs a retry policy for its thread with
``retrying(policy)``; the write points (the probe cache, the trial loop) go through
``write(call)``. Without a policy a write is made once, as before (the CLI: a failed write
is one line and the next run resumes).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

T = TypeVar("T")
Policy = Callable[[Callable[[], Any]], Any]
_current = threading.local()


@contextlib.contextmanager
def retrying(policy: Policy) -> Iterator[None]:
    """While inside, this thread's ``write`` calls go through ``policy(call)``."""
    previous = getattr(_current, "policy", None)
    _current.policy = policy
    try:
        yield
    finally:
        _current.policy = previous


def write(call: Callable[[], T]) -> T:
    """``call()`` (one storage write, safe to repeat), under this thread's retry policy."""
    policy = getattr(_current, "policy", None)
    return call() if policy is None else policy(call)
