"""Issue #36: `advisor suggest --timeout` bounds the screen's probes taken in one child
process (``run_probes``): each request's own timeout counts from the previous result, so
four probes could run for four timeouts (a real `--timeout 60s` run took 156 s, screening)."""

from __future__ import annotations

import time
from pathlib import Path

from advisor.probes.result import ProbeRequest
from advisor.probes.runner import PAST_DEADLINE, run_probes


def test_the_deadline_bounds_the_batch_and_starts_nothing_after_it(tmp_path: Path) -> None:
    hung = tmp_path / "python"  # a child that never answers, as a probe stuck in its step
    hung.write_text("#!/bin/sh\nexec sleep 60\n")
    hung.chmod(0o755)
    requests = [ProbeRequest("fcn", b, timeout_s=30.0) for b in (256, 512, 1024)]
    heard: list[int] = []
    started = time.monotonic()
    results = run_probes(
        requests,
        python=str(hung),
        on_result=lambda i, _r: heard.append(i),
        deadline=time.time() + 1.0,
    )
    took = time.monotonic() - started
    assert took < 10, took  # before: 3 x 30 s
    assert [r.status for r in results] == ["timeout"] * 3
    assert all(r.error == PAST_DEADLINE for r in results) and heard == [0, 1, 2]
    assert [r.batch_size for r in results] == [256, 512, 1024]
