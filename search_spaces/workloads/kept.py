"""Small generated data sets kept in memory, so repeated builds in one process reuse them.

``advisor suggest --tune`` builds a workload many times in one process (one short run per
configuration, on the same data); generating the data again each time cost as much as the
first quarter epoch of training. ``keep_small(limit)`` wraps a generator ``f(n, ...)``
returning ``(x, y)`` arrays: calls with ``n <= limit`` are answered from a small cache (a
few argument sets) with fresh copies, so no caller can change another's data; larger sets
are generated each time, as before (a probe's child process builds once).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar, cast

Generator = TypeVar("Generator", bound=Callable[..., Any])


def keep_small(limit: int, slots: int = 3) -> Callable[[Generator], Generator]:
    """Keep the last ``slots`` results of calls with at most ``limit`` samples."""

    def wrap(generate: Generator) -> Generator:
        kept = functools.lru_cache(maxsize=slots)(generate)

        @functools.wraps(generate)
        def call(n: int, *args: Any, **kwargs: Any) -> Any:
            if not 0 <= n <= limit:
                return generate(n, *args, **kwargs)
            x, y = kept(n, *args, **kwargs)
            return x.copy(), y.copy()

        return cast(Generator, call)

    return wrap
