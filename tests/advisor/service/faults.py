"""Fault-injection harness of ``test_faults.py``: a team's service on real processes.

``Cluster`` runs the real ``advisor serve --redis`` and ``advisor worker`` processes (each in
its own process group, so a signal reaches RQ's work horse too) on a real PostgreSQL and a real
Redis (``RedisServer``, restartable on its port, persisting nothing: a restart loses the
queue). The storage URL reaches them through ``ADVISOR_STORAGE``, never the command line.
Suggestions are scored by the replay back end of ``conftest.replay_table`` with ``delay_s``
seconds per evaluation (a probe's wall time, so a fault can land mid-job), screen off, so a
job of N trials adds exactly N trials to its own new study.

``Cluster.tally`` counts, after the faults: jobs lost (a request answered with an id whose job
does not exist, or a submission the client gave up on), stuck (not ended by the deadline),
failed, run twice (more trials added than asked, or a result that changed after a client had
seen ``done``), short (done with fewer trials than asked) and duplicate trials (two finished
trials of a study with the same machine, batch size and hyperparameters).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from conftest import advisor_cmd, free_port, wait_port

STACK_DUMP = Path(__file__).parent / "stack_dump"  # SIGUSR2 prints a worker's stacks

TRIALS = 6
# What every fault test must end with: nothing lost, stuck, failed, run twice, short,
# duplicated, and each done job's report counting the trials it added (``tally``).
ZERO = {
    "lost": 0,
    "stuck": 0,
    "failed": 0,
    "run_twice": 0,
    "short": 0,
    "duplicate_trials": 0,
    "miscounted": 0,
}


class RedisServer:
    """A Redis on a fixed free port that can be stopped (SIGKILL) and started again."""

    def __init__(self, folder: Path) -> None:
        self.exe = shutil.which("redis-server")
        self.port = free_port()
        self.folder = folder
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.proc: subprocess.Popen[bytes] | None = None
        self.start()

    def start(self) -> None:
        assert self.exe is not None
        args = ["--port", str(self.port), "--bind", "127.0.0.1", "--save", ""]
        args += ["--appendonly", "no", "--dir", str(self.folder)]
        self.proc = subprocess.Popen([self.exe, *args], stdout=subprocess.DEVNULL)
        wait_port(self.port, proc=self.proc)

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait(10)
            self.proc = None


class Proc:
    """A process in its own group: ``kill9``, ``pause`` and ``resume`` reach its children."""

    def __init__(self, cmd: list[str], log: Path, env: dict[str, str]) -> None:
        self.log = log
        self.popen = subprocess.Popen(
            cmd,
            stdout=log.open("wb"),
            stderr=subprocess.STDOUT,
            env={**os.environ, **env},
            start_new_session=True,
        )

    def signal(self, sig: int) -> None:
        """Send ``sig`` to the process and its children (RQ's work horse has its own group)."""
        import psutil

        try:
            parent = psutil.Process(self.popen.pid)
            tree = [*parent.children(recursive=True), parent]
        except psutil.NoSuchProcess:
            return
        for proc in tree:
            with contextlib.suppress(psutil.NoSuchProcess):
                proc.send_signal(sig)

    def pids(self) -> set[int]:
        """The process and its children now."""
        import psutil

        try:
            parent = psutil.Process(self.popen.pid)
            return {parent.pid, *(p.pid for p in parent.children(recursive=True))}
        except psutil.NoSuchProcess:
            return set()

    def kill9(self) -> None:
        self.signal(signal.SIGKILL)
        self.popen.wait(20)

    def pause(self) -> None:
        self.signal(signal.SIGSTOP)

    def resume(self) -> None:
        self.signal(signal.SIGCONT)

    def stop(self) -> None:
        self.signal(signal.SIGCONT)
        if self.popen.poll() is None:
            self.signal(signal.SIGKILL)
            self.popen.wait(20)


class Cluster:
    """``advisor serve`` and workers on one storage and one Redis, a client, and a watcher
    that records the first ``done`` result each job showed."""

    def __init__(
        self,
        tmp: Path,
        storage: str,
        redis: RedisServer | None,
        backend: str,
        lease_s: float,
        server_env: dict[str, str] | None = None,
    ) -> None:
        from advisor.service import auth
        from advisor.service.client import Client

        self.tmp, self.storage, self.redis = tmp, storage, redis
        self.backend, self.lease_s = backend, lease_s
        self.env = {"ADVISOR_STORAGE": storage}
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.server: Proc | None = None
        self.workers: dict[int, Proc] = {}
        self.started = 0
        self.token = auth.create_token(storage, "faults")
        self.client = Client(self.url, self.token, timeout_s=10, retry_s=90)
        self.jobs: list[str] = []
        self.given_up = 0  # submissions the client gave up on
        self.first_done: dict[str, str] = {}
        self._stop = threading.Event()
        self._watcher = threading.Thread(target=self._watch, daemon=True)
        self.start_server(server_env)
        self._watcher.start()

    # -- processes -------------------------------------------------------------------------

    def _log(self, name: str) -> Path:
        self.started += 1
        return self.tmp / f"{name}-{self.started}.log"

    def start_server(self, env: dict[str, str] | None = None) -> None:
        """``advisor serve --redis``, or without Redis (no ``redis``) with 2 job threads;
        ``env`` adds to its environment (a skewed clock)."""
        cmd = advisor_cmd("serve", "--port", str(self.port), "--stale-after", str(self.lease_s))
        if self.redis is not None:
            cmd += ["--redis", self.redis.url]
        else:
            cmd += ["--workers", "2", "--backend", self.backend]
        self.server = Proc(cmd, self._log("serve"), {**self.env, **(env or {})})
        wait_port(self.port, timeout=60, proc=self.server.popen)

    def start_worker(
        self, index: int, lease_s: float | None = None, env: dict[str, str] | None = None
    ) -> Proc:
        """``advisor worker`` (``--stale-after`` the cluster's lease unless ``lease_s``)."""
        assert self.redis is not None
        cmd = advisor_cmd("worker", "--redis", self.redis.url, "--backend", self.backend)
        cmd += ["--stale-after", str(lease_s or self.lease_s)]
        log = self._log(f"worker{index}")
        path = os.pathsep.join(filter(None, [str(STACK_DUMP), os.environ.get("PYTHONPATH")]))
        self.workers[index] = Proc(cmd, log, {**self.env, "PYTHONPATH": path, **(env or {})})
        return self.workers[index]

    def worker_of(self, job_id: str) -> Proc:
        """The worker process whose work horse holds the job now."""
        from sqlalchemy import select

        from advisor.service import db

        with db.engine_for(self.storage).connect() as conn:
            holder = conn.execute(select(db.jobs.c.worker).where(db.jobs.c.id == job_id)).scalar()
        pid = int(str(holder).split(":")[1])
        for proc in self.workers.values():
            if pid in proc.pids():
                return proc
        raise LookupError(f"no worker runs job {job_id} (held by {holder})")

    def lease(self, job_id: str) -> int:
        from advisor.service import jobs

        job = jobs.get(self.storage, job_id, internal=True)
        return 0 if job is None else int(job["lease"] or 0)

    def logs(self) -> str:
        return "\n".join(p.read_text(errors="replace") for p in sorted(self.tmp.glob("*.log")))

    def stall_report(self) -> str:
        """Where a stalled cluster waits: the database's sessions that are not idle (with the
        sessions blocking them), then each worker's log tail after SIGUSR2 made every worker
        process print its threads' stacks (``STACK_DUMP``)."""
        from sqlalchemy import text

        from advisor.service import db

        lines = []
        try:
            with db.engine_for(self.storage).connect() as conn:
                rows = conn.execute(
                    text(
                        "SELECT pid, state, wait_event_type, wait_event, pg_blocking_pids(pid),"
                        " round(extract(epoch FROM now() - xact_start)), left(query, 160)"
                        " FROM pg_stat_activity WHERE datname = current_database()"
                        " AND pid <> pg_backend_pid() AND state <> 'idle'"
                    )
                )
                lines += [" | ".join(map(str, row)) for row in rows]
        except Exception as exc:  # the report must not hide the failure it reports
            lines.append(f"pg_stat_activity unreadable: {exc}")
        for proc in self.workers.values():
            proc.signal(signal.SIGUSR2)
        time.sleep(1.0)
        for proc in self.workers.values():
            lines.append(f"== {proc.log.name}\n{proc.log.read_text(errors='replace')[-8000:]}")
        return "\n".join(lines)

    def close(self) -> None:
        self._stop.set()
        for proc in [*self.workers.values(), *([self.server] if self.server else [])]:
            proc.stop()

    # -- jobs ------------------------------------------------------------------------------

    def submit(self, budget: float, trials: int = TRIALS) -> str | None:
        """POST a suggestion (a new study per budget) through the retrying client."""
        from advisor.errors import AdvisorError

        body = {"model": "fcn", "budget_usd": budget, "trials": trials, "screen": False}
        try:
            job_id = self.client.start_suggestion(body)
        except AdvisorError:
            self.given_up += 1
            return None
        self.jobs.append(job_id)
        return job_id

    def _watch(self) -> None:
        from advisor.service import jobs

        while not self._stop.wait(0.25):
            for job_id in list(self.jobs):
                if job_id in self.first_done:
                    continue
                try:
                    job = jobs.get(self.storage, job_id)
                except Exception:  # the database is restarting
                    continue
                if job is not None and job["status"] == "done":
                    self.first_done[job_id] = json.dumps(job["result"], sort_keys=True)

    def trials_done(self, job_id: str) -> int:
        """Finished trials in the job's study (0 before its first run)."""
        from advisor.service import jobs, studies

        job = jobs.get(self.storage, job_id, internal=True)
        if job is None or job["study"] is None:
            return 0
        return studies.finished_trials(self.storage, job["study"]) - int(job["trials_before"])

    def status(self, job_id: str) -> str:
        from advisor.service import jobs

        job = jobs.get(self.storage, job_id)
        return "missing" if job is None else str(job["status"])

    def wait_for(self, what: Callable[[], bool], timeout: float = 90.0) -> None:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            try:
                if what():
                    return
            except Exception:  # the database may be down at this moment
                pass
            time.sleep(0.1)
        raise TimeoutError(f"not reached in {timeout:.0f} s\n{self.logs()[-4000:]}")

    def wait_ended(self, timeout: float = 120.0) -> None:
        """Until every job is done or failed (the rest count as stuck)."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            try:
                if all(self.status(j) in ("done", "failed") for j in self.jobs):
                    break
            except Exception:
                pass
            time.sleep(0.25)
        time.sleep(2 * self.lease_s)  # a late writer would show up now
        self._stop.set()

    def tally(self, trials: int = TRIALS) -> dict[str, int]:
        """The counts of the module's docstring, over every job submitted."""
        import optuna

        from advisor.service import api, jobs

        counts = Counter(lost=self.given_up)
        for job_id in self.jobs:
            job = jobs.get(self.storage, job_id, internal=True)
            if job is None:
                counts["lost"] += 1
                continue
            counts[job["status"]] += 1
            if job["status"] not in ("done", "failed"):
                counts["stuck"] += 1
            try:  # KeyError: it never began its first run, or failed before the study was made
                study = optuna.load_study(
                    study_name=job["study"], storage=api.optuna_storage(self.storage)
                )
                finished = [t for t in study.get_trials(deepcopy=False) if t.state.is_finished()]
            except KeyError:
                finished = []
            added = len(finished) - int(job["trials_before"] or 0)
            counts["trials_added"] += added
            changed = job_id in self.first_done and self.first_done[job_id] != json.dumps(
                job["result"], sort_keys=True
            )
            counts["run_twice"] += int(added > trials or changed)
            counts["short"] += int(job["status"] == "done" and added < trials)
            # The report counts every trial the job added, over all its runs (issue #38).
            reported = ((job["result"] or {}).get("trials") or {}).get("new")
            counts["miscounted"] += int(job["status"] == "done" and reported != added)
            configs = Counter(json.dumps(t.params, sort_keys=True) for t in finished)
            counts["duplicate_trials"] += sum(n - 1 for n in configs.values())
        for key in (
            "lost",
            "stuck",
            "failed",
            "run_twice",
            "short",
            "duplicate_trials",
            "miscounted",
        ):
            counts.setdefault(key, 0)
        counts["jobs"] = len(self.jobs) + self.given_up
        return dict(counts)


def record(fault: str, points: list[str], tally: dict[str, int], wall_s: float) -> None:
    """Append the test's figures to $ADVISOR_FAULT_LOG (one JSON line), when set."""
    path = os.environ.get("ADVISOR_FAULT_LOG")
    if path:
        row = {"fault": fault, "points": points, "wall_s": round(wall_s, 1), **tally}
        with open(path, "a") as fh:
            fh.write(json.dumps(row) + "\n")
