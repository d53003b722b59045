"""Service test fixtures: a replay back end (fast, no probes), a SQLite storage, tokens, and
real PostgreSQL / Redis servers started on free local ports in temporary folders."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from advisor.providers.catalog._types import InstanceType

from advisor.evaluation.replay import ReplayEntry, ReplayTable
from advisor.intervals import Interval

FAKE_SECRET = "AKIAFAKESECRET0123456789zzTOPSECRET"  # planted; must never come back out


def _inst(key: str, gpus: int, price: float, spot: float | None, acc: str) -> InstanceType:
    service, _, itype = key.partition(":")
    return InstanceType(
        provider="aws" if service == "ec2" else "local",
        service=service,
        instance_type=itype,
        vcpus=8 * max(gpus, 1),
        memory_gib=61.0 * max(gpus, 1),
        accelerator=acc if gpus else None,
        accelerator_count=gpus,
        accelerator_memory_gib=16.0 if gpus else 0.0,
        on_demand_usd_per_h=price,
        spot_usd_per_h=spot,
        price_date="2021-02-01",
        source="docs/method.md section 5",
    )


def replay_table(probe_s: float = 30.0) -> ReplayTable:
    """3 machines x 2 batch sizes + local (shaped like docs/method.md 2.4, as tests/helpers/replay_tables.py's)."""
    insts = [
        _inst("ec2:p2.xlarge", 1, 0.90, 0.27, "K80"),
        _inst("ec2:p3.2xlarge", 1, 3.06, 0.92, "V100"),
        _inst("ec2:p3.16xlarge", 8, 24.48, None, "V100"),
        _inst("local:local", 0, 0.0, None, ""),
    ]
    runtimes = {
        ("ec2:p2.xlarge", 256): 3000.0,
        ("ec2:p2.xlarge", 512): 2800.0,
        ("ec2:p3.2xlarge", 256): 900.0,
        ("ec2:p3.2xlarge", 512): 700.0,
        ("ec2:p3.16xlarge", 256): 800.0,
        ("ec2:p3.16xlarge", 512): 300.0,
        ("local:local", 256): 20000.0,
        ("local:local", 512): 19000.0,
    }
    entries = [
        ReplayEntry(
            m,
            b,
            Interval(rt, rt * 0.95, rt * 1.05),
            predicted=Interval(rt * 1.1, rt * 0.8, rt * 1.4),
            probe_s=probe_s,
        )
        for (m, b), rt in runtimes.items()
    ]
    return ReplayTable(tuple(insts), tuple(entries), snapshot="test-2021-02", epochs=10)


@pytest.fixture
def replay(tmp_path: Path) -> str:
    """The back end spec ``replay:TABLE.json`` for this test: passed explicitly to the
    dispatcher, ``advisor serve --backend`` and ``advisor worker --backend``."""
    path = tmp_path / "table.json"
    replay_table().save(path)
    return f"replay:{path}"


@pytest.fixture
def sqlite_url(_advisor_home: Path) -> str:
    """The embedded default storage, in this test's ADVISOR_HOME."""
    _advisor_home.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{_advisor_home / 'studies.db'}"


def free_port() -> int:
    """A free TCP port on the loopback interface."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_port(port: int, timeout: float = 30.0, proc: subprocess.Popen[Any] | None = None) -> None:
    """Wait until something listens on ``port``."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"process exited with {proc.returncode}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise TimeoutError(f"nothing listens on port {port} after {timeout} s")


def advisor_cmd(*args: str) -> list[str]:
    """The advisor CLI of this virtualenv as a subprocess command."""
    return [sys.executable, "-m", "advisor.cli.main", *args]


class Server:
    """A real `advisor serve` process on a free port, its log kept in a file."""

    def __init__(self, tmp: Path, storage: str, *extra: str, env: dict[str, str] | None = None):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = tmp / f"serve-{self.port}.log"
        cmd = advisor_cmd("serve", "--port", str(self.port), "--storage", storage, *extra)
        self.proc = subprocess.Popen(
            cmd,
            stdout=self.log.open("w"),
            stderr=subprocess.STDOUT,
            env={**os.environ, **(env or {})},
        )
        wait_port(self.port, proc=self.proc)

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def _run_as_postgres(cmd: list[str]) -> list[str]:
    """PostgreSQL refuses to run as root: run its tools as the 'postgres' user then."""
    if os.geteuid() == 0:
        return ["runuser", "-u", "postgres", "--", *cmd]
    return cmd


def _pg_bin(name: str) -> str:
    found = shutil.which(name)
    if found:
        return found
    for base in sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True):
        if (base / name).exists():
            return str(base / name)
    pytest.skip(f"PostgreSQL's {name} is not installed (apt-get install postgresql)")
    raise AssertionError  # unreachable


class Postgres:
    """A throw-away PostgreSQL cluster in a temporary folder on a free port."""

    def __init__(self, root: Path) -> None:
        self.dir = root / "pgdata"
        self.port = free_port()
        root.mkdir(parents=True, exist_ok=True)
        if os.geteuid() == 0:
            shutil.chown(root, "postgres")
        subprocess.run(
            _run_as_postgres(
                [_pg_bin("initdb"), "-D", str(self.dir), "-U", "advisor", "-A", "trust"]
            ),
            check=True,
            capture_output=True,
        )
        self.start()
        self.url = f"postgresql://advisor@127.0.0.1:{self.port}/postgres"

    def start(self) -> None:
        subprocess.run(
            _run_as_postgres(
                [
                    _pg_bin("pg_ctl"),
                    "-D",
                    str(self.dir),
                    "-l",
                    str(self.dir.parent / "pg.log"),
                    "-o",
                    f"-p {self.port} -k {self.dir.parent} -c listen_addresses=127.0.0.1 "
                    "-c fsync=off -c max_connections=200",
                    "-w",
                    "start",
                ]
            ),
            check=True,
            capture_output=True,
        )

    def stop(self, mode: str = "fast") -> None:
        subprocess.run(
            _run_as_postgres([_pg_bin("pg_ctl"), "-D", str(self.dir), "-m", mode, "-w", "stop"]),
            check=False,
            capture_output=True,
        )


@pytest.fixture(scope="session")
def postgres(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Postgres]:
    """A real PostgreSQL for the session's tests (skipped when not installed)."""
    pytest.importorskip("psycopg")
    import tempfile

    # Not under pytest's folder: that is private to root, and PostgreSQL runs as 'postgres'.
    root = Path(tempfile.mkdtemp(prefix="advisor-pg-"))
    pg = Postgres(root)
    yield pg
    pg.stop("immediate")
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def pg_url(postgres: Postgres) -> Iterator[str]:
    """A fresh database in the session's PostgreSQL for one test."""
    import uuid

    import psycopg

    name = "t" + uuid.uuid4().hex[:12]
    base = f"postgresql://advisor@127.0.0.1:{postgres.port}/postgres"
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    yield f"postgresql://advisor@127.0.0.1:{postgres.port}/{name}"


@pytest.fixture
def redis_url(tmp_path: Path) -> Iterator[str]:
    """A real Redis on a free port, persisting nothing, for one test."""
    exe = shutil.which("redis-server")
    if exe is None:
        pytest.skip("redis-server is not installed (apt-get install redis-server)")
    pytest.importorskip("rq")
    port = free_port()
    proc = subprocess.Popen(
        [
            exe,
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(tmp_path),
        ],
        stdout=subprocess.DEVNULL,
    )
    wait_port(port, proc=proc)
    yield f"redis://127.0.0.1:{port}/0"
    proc.terminate()
    proc.wait(10)


@pytest.fixture
def make_server(tmp_path: Path) -> Iterator[Any]:
    """Start real `advisor serve` processes; stopped at the end of the test."""
    started: list[Server] = []

    def make(storage: str, *extra: str, env: dict[str, str] | None = None) -> Server:
        srv = Server(tmp_path, storage, *extra, env=env)
        started.append(srv)
        return srv

    yield make
    for srv in started:
        if srv.proc.poll() is None:
            srv.stop()


@pytest.fixture
def redis(tmp_path: Path) -> Iterator[Any]:
    """A Redis server of the fault suite's own (``faults.RedisServer``) on a free port."""
    pytest.importorskip("rq")
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not installed (apt-get install redis-server)")
    from faults import RedisServer  # faults.py imports this conftest: imported when used

    server = RedisServer(tmp_path)
    yield server
    server.stop()
