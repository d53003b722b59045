"""Issue #28: several studies at once on the default SQLite storage, and every storage fault
as one line that says what to do.

Two processes each run three studies of their own, at the same time, on the one default file
(the real pipeline with fixed probe timings: ``suggest_with_fake_probes.py``). Before the fix
one of them failed in 4 of 4 such runs ("disk I/O error" / "file is not a database"): the
storage check read the file's header through a plain handle after the process had opened it,
and closing that handle dropped the POSIX locks SQLite held for the process's connections.
Three studies each (six until 2026-11-27: 61 s of CPU, now 37 s) still fail 3 of 3 runs with
that plain handle put back ("sqlite3.OperationalError: disk I/O error").
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).parent


@pytest.mark.slow
def test_two_processes_run_different_studies_on_the_default_file(_advisor_home: Path) -> None:
    script = str(HERE / "suggest_with_fake_probes.py")
    procs = [
        subprocess.Popen(
            [sys.executable, script, kind, "3"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for kind in ("time", "pareto")
    ]
    results = [(p, *p.communicate(timeout=600)) for p in procs]
    for proc, out, err in results:
        assert proc.returncode == 0, err[-3000:]
        assert "3 studies" in out
    assert (_advisor_home / "studies.db").exists()
