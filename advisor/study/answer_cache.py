"""The answer of a study that has stopped, kept with it, so that the same command answers at
once (issue #28: resumed within a second).

A study that stopped on its own gets no new trials when the same command runs again, so its
report can only change when something it was computed from changed. ``advisor suggest``
keeps the report in the study (user attribute ``ANSWER``) with a fingerprint of those
inputs:

- the study's trials (how many, and when the last one finished);
- the probes cached for this workload on this machine (their stored values);
- the calibration ledger (how many measured runs it holds);
- the catalog snapshot's files (names and modification times);
- this package's version and the report format (``FORMAT``).

An answer with probes timed on a busy machine is reused while the machine is still busy
(re-screening then would retake nothing: issue #36) and recomputed once it is quiet, when
those probes are retaken.

``cached_answer`` recomputes the fingerprint by reading the SQLite file directly (no Optuna,
no SQLAlchemy: importing them alone takes most of a second) and returns the kept report only
when every input is unchanged and the study had stopped on its own; otherwise None, and the
study runs as usual. Any other storage than a SQLite file is never read this way.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import time
from pathlib import Path
from typing import Any

from advisor.config import default_storage_url

ANSWER = "answer"  # study user attribute: {"key": fingerprint, "report": the JSON report}
FORMAT = 2  # raise when the report's content changes meaning (2: issue #50, no beaten pick)
LEDGER_STUDY = "advisor-calibration-ledger"  # advisor.prediction.timing.ledger.LEDGER_STUDY
PROBE_CACHE_STUDY = "advisor-probe-cache"  # advisor.evaluation.probe_cache.PROBE_CACHE_STUDY


def sqlite_path(url: str | None) -> Path | None:
    """The file of a SQLite storage URL (None: the default file), else None."""
    url = url or default_storage_url()
    if not url.startswith("sqlite:///"):
        return None
    path = url.removeprefix("sqlite:///").split("?", 1)[0]
    return Path(path) if path not in ("", ":memory:") else None


def _study_id(con: sqlite3.Connection, name: str) -> int | None:
    row = con.execute("SELECT study_id FROM studies WHERE study_name = ?", (name,)).fetchone()
    return None if row is None else int(row[0])


def _attr(con: sqlite3.Connection, study_id: int, key: str) -> Any:
    row = con.execute(
        "SELECT value_json FROM study_user_attributes WHERE study_id = ? AND key = ?",
        (study_id, key),
    ).fetchone()
    return None if row is None else json.loads(row[0])


def _connect(db: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10)


def fingerprint(db: Path, study: str, workload: str, framework: str, snapshot: Path) -> str:
    """The fingerprint of everything study ``study``'s report is computed from (see above)."""
    with _connect(db) as con:
        sid = _study_id(con, study)
        trials = con.execute(
            "SELECT COUNT(*), MAX(datetime_complete) FROM trials WHERE study_id = ?", (sid,)
        ).fetchone()
        ledger = _study_id(con, LEDGER_STUDY)
        ledger_n = (
            con.execute("SELECT COUNT(*) FROM trials WHERE study_id = ?", (ledger,)).fetchone()[0]
            if ledger is not None
            else 0
        )
        cache = _study_id(con, PROBE_CACHE_STUDY)
        probes = (
            con.execute(
                "SELECT key, value_json FROM study_user_attributes WHERE study_id = ? "
                "AND instr(key, ?) > 0 ORDER BY key",
                (cache, f"{workload}|{framework}|"),
            ).fetchall()
            if cache is not None
            else []
        )
    files = sorted((p.name, p.stat().st_mtime_ns) for p in snapshot.iterdir() if p.is_file())
    ident = [FORMAT, _version(), list(trials), ledger_n, probes, files]
    return hashlib.sha1(json.dumps(ident, default=str).encode()).hexdigest()


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("advisor")
    except PackageNotFoundError:  # run from a source tree
        return "source"


def keep(
    study: Any, db: Path | None, workload: str, framework: str, snapshot: Path, report: dict
) -> None:
    """Keep ``report`` in ``study`` (an Optuna study in the SQLite file ``db``) with the
    fingerprint of its inputs; nothing for another storage."""
    if db is None or not db.exists():
        return
    key = fingerprint(db, study.study_name, workload, framework, snapshot)
    study.set_user_attr(ANSWER, {"key": key, "report": report})


def cached_answer(
    db: Path | None, study: str, workload: str, framework: str, snapshot: Path
) -> dict[str, Any] | None:
    """The kept report of ``study`` when it had stopped on its own and nothing it was
    computed from changed; its run counters say that this run added nothing."""
    if db is None or not db.exists():
        return None
    try:
        with _connect(db) as con:
            sid = _study_id(con, study)
            if sid is None:
                return None
            last_run = _attr(con, sid, "last_run") or {}
            answer = _attr(con, sid, ANSWER)
        if not last_run.get("final") or not isinstance(answer, dict):
            return None
        busy = bool(answer["report"].get("contention_notes"))
        if busy and _quiet_now():  # a busy machine's probes: retaken now that it is quiet
            return None
        if answer.get("key") != fingerprint(db, study, workload, framework, snapshot):
            return None
    except (sqlite3.Error, OSError, ValueError, TypeError):  # anything odd: the usual path
        return None
    report: dict[str, Any] = answer["report"]
    total = report.get("trials", {}).get("total", 0)
    report["resumed"] = True
    report["stop_reason"] = (
        f"resumed: the study had already stopped ({last_run.get('stop')}) after {total} "
        "trials; no new trials (--trials N adds N)"
    )
    report.setdefault("trials", {})["new"] = 0
    report.setdefault("probes", {})["new"] = 0
    report["answered_from"] = "kept answer (every input unchanged)"
    if busy:  # issue #36: a re-run on a machine still busy screened again for nothing
        report["answered_from"] += (
            "; the machine is still busy, so the probes timed while it was are kept"
        )
    return report


def _quiet_now() -> bool:
    """Whether the machine is quiet now (``advisor.evaluation.contention.quiet_now``): then a
    run retakes the probes timed while it was busy, so their kept answer is not reused."""
    from advisor.evaluation.contention import quiet_now

    return quiet_now()


def answer_for(options: Any) -> dict[str, Any] | None:
    """``cached_answer`` for ``advisor suggest OPTIONS`` (``SuggestOptions``): the kept report
    of the study the options name, when it may be reused; None otherwise (``--trials`` asks
    for more trials, ``--cloud-probes`` for measurements, another storage than SQLite...)."""
    started = time.perf_counter()
    if options.trials is not None or options.cloud_probes or not options.screen:
        return None
    if getattr(options, "tune_s", None) is not None:  # issue #29: --tune may add short runs
        return None
    db = sqlite_path(options.storage)
    if db is None or not db.exists():
        return None
    from advisor.errors import AdvisorError
    from advisor.options import workload_info
    from advisor.providers.catalog import snapshot_dir
    from advisor.search_spaces.filters import machine_filter
    from advisor.search_spaces.loader import default_space
    from advisor.study.naming import study_name_for

    try:
        workload = workload_info(options)
        space = machine_filter(options, options.space or default_space(workload.name))
        snapshot, folder = snapshot_dir(options.snapshot)
    except AdvisorError:
        return None  # the usual path says what is wrong
    name = study_name_for(options, workload, space, snapshot)
    report = cached_answer(db, name, workload.name, workload.framework, folder)
    if report is not None:
        report["wall_s"] = round(time.perf_counter() - started, 3)  # this run's, not the kept
        report["timings"] = {"kept answer": report["wall_s"]}  # issue #50: what took it
    return report
