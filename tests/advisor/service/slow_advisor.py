"""Fault-injection harness: the advisor CLI with each replayed probe taking
``ADVISOR_TEST_PROBE_SLEEP`` seconds of wall time (so a test can kill a worker mid-probe or
restart the database mid-study). Everything else is the real code."""

from __future__ import annotations

import os
import time
from typing import Any

from advisor.evaluation.replay import ReplayBackend

_real = ReplayBackend._runtime
_SLEEP = float(os.environ.get("ADVISOR_TEST_PROBE_SLEEP", "0"))


def _slow(self: ReplayBackend, *args: Any, **kwargs: Any) -> Any:
    time.sleep(_SLEEP)
    return _real(self, *args, **kwargs)


ReplayBackend._runtime = _slow  # type: ignore[method-assign]

if __name__ == "__main__":
    from advisor.cli.main import main

    main()
