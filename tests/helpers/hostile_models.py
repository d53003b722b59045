"""Hostile user models (issue #50, section 3): builders and forwards that exit the process,
crash it, hang, or allocate without end. ``advisor`` must run them at arm's length: each
ends as one line naming the model and the fix, never as the advisor's own exit or hang.

Each builder returns a valid tiny setup (``user_models.build``'s) unless its hostile act
stops it first, so the act is the only thing wrong with it.
"""

from __future__ import annotations

import ctypes
import os
import sys
import time
from typing import Any

import torch
from torch import nn
from user_models import build


def build_exits(**kwargs: Any) -> Any:
    """The builder calls ``sys.exit(3)``."""
    sys.exit(3)


class _ExitingForward(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(8, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        os._exit(7)


def build_forward_exits(batch_size: int = 32, seed: int = 0, **_: Any) -> Any:
    """The builder is fine; the model's forward calls ``os._exit(7)``."""
    _, loss, _, train, val = build(batch_size, seed)
    model = _ExitingForward()
    return model, loss, torch.optim.SGD(model.parameters(), lr=0.1), train, val


def build_segfaults(**_: Any) -> Any:
    """The builder crashes the interpreter (reads address 0: SIGSEGV)."""
    ctypes.string_at(0)


def build_sleeps(batch_size: int = 32, seed: int = 0, **_: Any) -> Any:
    """The builder blocks (sleeps) for an hour: it uses no CPU while it waits."""
    time.sleep(3600)
    return build(batch_size, seed)


def build_sleeps_when_real(batch_size: int = 32, seed: int = 0, **_: Any) -> Any:
    """The builder sleeps for an hour when it builds for real (a probe); traced on the meta
    device (the check before a probe) it returns at once."""
    if torch.empty(0).device.type != "meta":
        time.sleep(3600)
    return build(batch_size, seed)


class _SleepingForward(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(8, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        time.sleep(3600)
        return self.a(x)


def build_forward_sleeps(batch_size: int = 32, seed: int = 0, **_: Any) -> Any:
    """The model's forward sleeps for an hour."""
    _, loss, _, train, val = build(batch_size, seed)
    model = _SleepingForward()
    return model, loss, torch.optim.SGD(model.parameters(), lr=0.1), train, val


def build_hogs_memory(**_: Any) -> Any:
    """The builder allocates memory without end (64 MiB more each round, zero-filled, so
    every page is touched)."""
    held = []
    while True:
        held.append(bytearray(2**26))


# Plain functions for ``call_isolated`` itself (tests/probes/test_isolated.py): importable
# by the worker, as a user's module is.


def pid() -> int:
    """The process it runs in."""
    return os.getpid()


def raise_value_error(text: str) -> None:
    raise ValueError(text)


def kill_self() -> None:
    """A crash: SIGKILL to its own process."""
    os.kill(os.getpid(), 9)


def hog() -> None:
    """Allocate without end, 32 MiB at a time (zero-filled: every page touched)."""
    held = []
    while True:
        held.append(bytearray(2**25))
