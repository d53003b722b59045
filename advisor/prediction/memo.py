"""The prediction room's one kind of in-process cache.

Contract of a ``Memo``:

- **key**: a string (or tuple) that names everything the value is computed from (the
  workload, its hyperparameters, the batch, the plan's shape...). A value is a pure function of
  its key and of nothing that changes while the process runs, so an entry never goes stale:
  nothing invalidates it but ``clear`` (tests, and ``forget_all``). A value read from outside
  the process (the ledger's records) carries its source's stamp and is re-read when the stamp
  moves; its writer ``discard``s it.
- **bound**: at most ``bound`` entries; past it the least recently used one is dropped (a
  screen reads the same few keys thousands of times, so the bound only limits a long-lived
  service's memory).
- **values** are kept as they are (frozen dataclasses, or treated as read-only by callers).

Every memo registers itself, so ``forget_all`` empties them all at once.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any, Generic, TypeVar

T = TypeVar("T")

_ALL: list[Memo[Any]] = []


class Memo(Generic[T]):
    """A bounded, thread-safe, least-recently-used map from a key to a computed value."""

    def __init__(self, name: str, bound: int = 1024) -> None:
        if bound < 1:
            raise ValueError(f"bound must be >= 1, but got {bound}")
        self.name = name
        self.bound = bound
        self._data: OrderedDict[Hashable, T] = OrderedDict()
        self._lock = threading.Lock()
        _ALL.append(self)

    def get(self, key: Hashable) -> T | None:
        with self._lock:
            if key not in self._data:
                return None
            self._data.move_to_end(key)
            return self._data[key]

    def put(self, key: Hashable, value: T) -> None:
        with self._lock:
            self._data[key] = value
            self._data.move_to_end(key)
            while len(self._data) > self.bound:
                self._data.popitem(last=False)

    def get_or_make(self, key: Hashable, make: Callable[[], T]) -> T:
        """The value of ``key``, made by ``make()`` the first time (an exception is not kept:
        the next call tries again)."""
        found = self.get(key)
        if found is not None:
            return found
        value = make()
        self.put(key, value)
        return value

    def items(self) -> list[tuple[Hashable, T]]:
        """The entries now, least recently used first (a copy)."""
        with self._lock:
            return list(self._data.items())

    def discard(self, key: Hashable) -> None:
        with self._lock:
            self._data.pop(key, None)

    def clear(self) -> None:
        with self._lock:
            self._data.clear()

    def __len__(self) -> int:
        return len(self._data)


def entries(name: str) -> list[tuple[Hashable, Any]]:
    """The entries of the memos called ``name`` now (``advisor.shipped_traces`` reads the
    traces a first answer took)."""
    return [item for memo in _ALL if memo.name == name for item in memo.items()]


def forget_all() -> None:
    """Empty every memo of this process (tests), and the probes' kept FSDP traces
    (``advisor.probes.operators.replica_carry``)."""
    from advisor.probes.operators.replica_carry import RANK_TRACES

    for memo in _ALL:
        memo.clear()
    RANK_TRACES.clear()
