"""Tests only: put this folder on a child process's PYTHONPATH to run its clock
``ADVISOR_TEST_CLOCK_SKEW_S`` seconds ahead (``time.time``: what a host whose clock is off
would read), as the fault suite's clock-skew test does."""

import os
import time

_SKEW_S = float(os.environ.get("ADVISOR_TEST_CLOCK_SKEW_S", "0") or 0)
if _SKEW_S:
    _real_time, _real_time_ns = time.time, time.time_ns
    time.time = lambda: _real_time() + _SKEW_S
    time.time_ns = lambda: _real_time_ns() + int(_SKEW_S * 1e9)
