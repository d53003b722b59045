"""One regression test per class of bad input from issue #18: each is refused where it enters,
with exit 2 and one line saying what is wrong (never a traceback, never accepted silently)."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any

import optuna
import pytest
from cli_run import SUBMIT_DRY_RUN as SUBMIT

from advisor.config import user_catalog_dir

MEMORY = "sqlite:///:memory:"


def _error(cli: Any, *args: str) -> str:
    """Run ``advisor ARGS``, require exit 2 with one line, return that line."""
    outcome = cli.run_checked(*args)
    assert outcome.code == 2, outcome
    return outcome.err.strip()


def _storage_error(cli: Any, url: str) -> str:
    """The one line `advisor suggest --model fcn --storage URL` exits 2 with."""
    return _error(cli, "suggest", "--model", "fcn", "--storage", url)


# --- CLI options -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["suggest", "--model", "fcn", "--seed", "-1"], "'--seed': -1 is out of range"),
        (["suggest", "--model", "fcn", "--threads", "-1"], "'--threads': -1 is out of range"),
        (["suggest", "--model", "fcn", "--n-train", "-5"], "'--n-train': -5 is out of range"),
        (["suggest", "--model", "fcn", "--epochs", "-5"], "'--epochs': -5 is out of range"),
        (["suggest", "--model", "fcn", "--probe-budget", "nan"], "'nan' is not a finite number"),
        (["suggest", "--model", "fcn", "--budget", "inf"], "'inf' is not a finite number"),
        (["suggest", "--model", "fcn", "--timeout", "nan"], "Cannot read the duration 'nan'"),
        (["suggest", "--model", "fcn", "--deadline", "0s"], "must be longer than 0"),
        (["catalog", "--max-price", "nan"], "'nan' is not a finite number"),
        (["catalog", "--min-gpus", "-1"], "'--min-gpus': -1 is out of range"),
        (["dashboard", "--port", "70000"], "'--port': 70000 is out of range"),
        (["probe", "--model", "fcn", "--batch-size", "8", "--timeout", "nan"], "not a finite"),
        (["estimate", "--model", "fcn", "--batch-size", "8", "--price", "-1"], "out of range"),
        (["predict", "-m", "fcn", "-b", "0", "-i", "p3.2xlarge"], "'-b': 0 is out of range"),
    ],
)
def test_numbers_are_finite_and_in_range(cli: Any, args: list[str], words: str) -> None:
    line = _error(cli, *args)
    assert words in line and line.startswith("Error: Invalid value for")


def test_output_paths_are_checked_before_the_work(
    cli: Any, tmp_path: Path, _advisor_home: Path
) -> None:
    # --plot into a folder that does not exist: refused before any study is opened
    line = _error(
        cli,
        "suggest",
        "--model",
        "fcn",
        "--space",
        str(cli.space),
        "--plot",
        str(tmp_path / "missing" / "plot.png"),
    )
    assert "'--plot'" in line and "does not exist" in line
    assert not (_advisor_home / "studies.db").exists()
    assert "'--plot'" in _error(cli, "suggest", "--model", "fcn", "--plot", str(tmp_path))
    assert "must end in .png" in _error(cli, "suggest", "--model", "fcn", "--plot", "x.pdf")
    # --out: a folder, and a read-only folder
    assert "is a folder" in _error(
        cli, "probe", "--model", "fcn", "--batch-size", "8", "--out", str(tmp_path)
    )
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        if os.access(locked, os.W_OK):  # root writes anywhere: nothing to refuse
            return
        line = _error(cli, *SUBMIT, "--batch-size", "64", "--out", str(locked / "request.json"))
        assert "'--out'" in line and "not writable" in line
    finally:
        locked.chmod(0o700)


def test_a_valid_output_path_still_works(cli: Any, tmp_path: Path) -> None:
    out = tmp_path / "request.json"
    outcome = cli.run_checked(*SUBMIT, "--batch-size", "64", "--out", str(out))
    assert outcome.code == 0 and json.loads(out.read_text())["HyperParameterTuningJobName"]


# --- submit ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        (["--batch-size", "0"], "'--batch-size': 0 is out of range"),
        (["--batch-size", "-1"], "'--batch-size': -1 is out of range"),
        (["--batch-size", "64", "--epochs", "0"], "'--epochs': 0 is out of range"),
        (["--batch-size", "64", "--tune", "lr,nosuch"], "--tune names nosuch"),
    ],
)
def test_submit_dry_run_refuses_nonsense(cli: Any, extra: list[str], words: str) -> None:
    assert words in _error(cli, *SUBMIT, *extra)


def test_the_probe_cache_is_not_a_user_study(cli: Any) -> None:
    for args in (
        ["suggest", "--model", "fcn", "--study-name", "advisor-probe-cache"],
        ["submit", "--provider", "sagemaker", "--dry-run", "--study", "advisor-probe-cache"],
        ["import", "job-1", "--provider", "sagemaker", "--study", "advisor-probe-cache"],
    ):
        assert "internal probe cache" in _error(cli, *args)


# --- storage URLs and files --------------------------------------------------------------

STORAGE_COMMANDS = (
    ("suggest", "--model", "fcn"),
    ("submit", "--provider", "sagemaker", "--dry-run", "--study", "s"),
    ("import", "job-1", "--provider", "sagemaker", "--study", "s"),
    ("export", "--study", "s", "--to", "skypilot"),  # issue #37
    ("dashboard",),
)


def _newer_schema_db(path: Path) -> Path:
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    optuna.create_study(storage=f"sqlite:///{path}", study_name="s")
    with sqlite3.connect(path) as db:  # as if a future Optuna had migrated it
        db.execute("UPDATE alembic_version SET version_num = 'v99.0.0.a'")
    return path


@pytest.mark.parametrize("command", STORAGE_COMMANDS, ids=lambda c: c[0])
def test_bad_storages_are_one_line_in_every_command(
    cli: Any, tmp_path: Path, command: tuple[str, ...]
) -> None:
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"this is not a database\n" * 10)
    folder = tmp_path / "folder.db"
    folder.mkdir()
    newer = _newer_schema_db(tmp_path / "newer.db")
    cases = {
        "foo://host/db": "unknown database scheme 'foo'",
        "not a url": "is not a database URL",
        f"sqlite:///{garbage}": "is not an SQLite database",
        f"sqlite:///{folder}": "is a folder",
        f"sqlite:///{tmp_path}/missing/studies.db": "does not exist",
        f"sqlite:///{newer}": "another Optuna version",
    }
    for url, words in cases.items():
        line = _error(cli, *command, "--storage", url)
        assert words in line, (url, line)


def test_postgres_without_driver_names_the_extra(cli: Any) -> None:
    pytest.importorskip("sqlalchemy")
    try:
        import pg8000  # noqa: F401

        pytest.skip("pg8000 is installed here")
    except ImportError:
        pass
    line = _storage_error(cli, "postgresql+pg8000://user:hunter2@localhost/db")
    assert "needs the database driver" in line and "hunter2" not in line


def test_postgresql_without_any_driver_names_the_postgres_extra(
    cli: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    for driver in ("psycopg", "psycopg2"):  # as on a machine without either driver
        monkeypatch.setitem(sys.modules, driver, None)
    line = _storage_error(cli, "postgresql://u:pw@localhost/db")
    assert "advisor[postgres]" in line and "psycopg[binary]" in line and ":pw@" not in line


def test_unreachable_postgres_is_one_line(cli: Any) -> None:
    pytest.importorskip("psycopg")
    line = _storage_error(cli, "postgresql+psycopg://user:hunter2@127.0.0.1:1/db?connect_timeout=2")
    assert "Cannot use the storage" in line and "hunter2" not in line


def test_advisor_home_that_is_a_file(
    cli: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home-file"
    home.write_text("x")
    monkeypatch.setenv("ADVISOR_HOME", str(home))
    for command in STORAGE_COMMANDS:
        assert "ADVISOR_HOME" in _error(cli, *command)


def test_garbage_default_study_file(cli: Any, _advisor_home: Path) -> None:
    _advisor_home.mkdir(parents=True, exist_ok=True)
    (_advisor_home / "studies.db").write_bytes(b"\x00garbage" * 100)
    assert "is not an SQLite database" in _error(cli, "suggest", "--model", "fcn")


# --- space files -------------------------------------------------------------------------

BOMB = (
    'workload: fcn\nhyperparameters:\n  a: &a ["lol","lol","lol","lol","lol","lol","lol","lol"]\n'
    + "".join(
        f"  {n}: &{n} [{','.join([f'*{p}'] * 9)}]\n"
        for p, n in zip("abcdefg", "bcdefgh", strict=True)
    )
    + "  z: {type: categorical, choices: *h}\n"
)


def _space(cli: Any, tmp_path: Path, text: str | bytes, name: str = "space.yaml") -> str:
    path = tmp_path / name
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    return _error(cli, "suggest", "--model", "fcn", "--space", str(path), "--storage", MEMORY)


def test_alias_bomb_is_refused_fast(cli: Any, tmp_path: Path, _advisor_home: Path) -> None:
    assert len(BOMB.encode()) <= 520  # the file was 497 bytes; 9**7 strings expanded
    started = time.perf_counter()
    line = _space(cli, tmp_path, BOMB)
    assert "expands to more than" in line and "space.yaml line" in line
    assert time.perf_counter() - started < 2.0
    assert not (_advisor_home / "studies.db").exists()


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("workload: fcn\nx: !!python/object/apply:os.system [id]\n", "tag !!python/object/apply"),
        ("workload: fcn\nbatch_sizes: " + "[" * 200 + "]" * 200 + "\n", "nested deeper than"),
        ("workload: fcn\nhyperparameters: &h\n  a: *h\n", "alias refers to itself"),
        (b"workload: fcn\n# caf\xe9\n", "line 2: not UTF-8 text"),
        ("workload: fcn\n\x01\n", "is not allowed in YAML"),
        (
            "workload: fcn\nhyperparameters:\n  a: {type: categorical, choices: [x, y], "
            "condition: {on: a, values: [x]}}\n",
            "is on the parameter itself",
        ),
        (
            "workload: fcn\nhyperparameters:\n"
            "  a: {type: categorical, choices: [x, y], condition: {on: b, values: [x]}}\n"
            "  b: {type: categorical, choices: [x, y], condition: {on: a, values: [x]}}\n",
            "forms a cycle (a -> b -> a)",
        ),
        (
            "workload: fcn\nhyperparameters:\n  dropout: {type: float, low: 0.1, high: 2.55}\n",
            "takes dropout a number >= 0 and < 1, but the space allows 2.55",
        ),
        (
            "workload: fcn\nhyperparameters:\n  lr: {type: float, low: -0.65, high: 0.1}\n",
            "takes lr a number > 0",
        ),
        (
            "workload: fcn\nhyperparameters:\n  optimizer: {type: categorical, choices: [sgd, adamm]}\n",
            "but the space allows 'adamm'",
        ),
        (
            "workload: fcn\nhyperparameters:\n  lr: {type: float, low: 0.1, high: .inf}\n",
            "must be finite",
        ),
        ("workload: fcn\nmachines:\n  instance_types: [p3.2xlarg]\n", "did you mean p3.2xlarge"),
        ("workload: fcn\nx: &a 1\ny: [" + "*a, " * 150 + "]\n", "more than 100 YAML aliases"),
        ("workload: fcn\n" + "# padding\n" * 30_000, "larger than 256 KiB"),
    ],
)
def test_bad_space_files(cli: Any, tmp_path: Path, text: str | bytes, words: str) -> None:
    assert words in _space(cli, tmp_path, text)


def test_space_file_without_yaml_suffix_is_not_read_as_yaml_text(cli: Any, tmp_path: Path) -> None:
    assert "does not end in .yaml or .yml" in _space(cli, tmp_path, "workload: fcn\n", "space.txt")


def test_shipped_spaces_pass_their_own_checks() -> None:
    from advisor.search_spaces.loader import default_space
    from advisor.search_spaces.workloads import names

    for name in names():
        assert default_space(name).workload == name


# --- catalog data ------------------------------------------------------------------------


def test_snapshot_csv_that_is_not_utf8(cli: Any) -> None:
    from advisor.providers.catalog._store import DATA_DIR

    target = user_catalog_dir() / "2099-01"
    shutil.copytree(DATA_DIR / "2026-11", target, ignore=shutil.ignore_patterns("__*"))
    data = (target / "aws.csv").read_bytes().splitlines(keepends=True)
    data[3] = data[3].replace(b"ec2", b"ec\xff", 1)
    (target / "aws.csv").write_bytes(b"".join(data))
    line = _error(cli, "catalog", "--snapshot", "2099-01")
    assert "aws.csv line 4: not UTF-8 text" in line


@pytest.mark.parametrize(
    "items",
    [
        ["not an object"],
        [
            {
                "armSkuName": "Standard_NC6",
                "type": "Consumption",
                "unitOfMeasure": "1 Hour",
                "skuName": "NC6",
                "productName": "NC Series",
                "retailPrice": "NaN",
            }
        ],
        [
            {
                "armSkuName": "Standard_NC6",
                "type": "Consumption",
                "unitOfMeasure": "1 Hour",
                "skuName": "NC6",
                "productName": "NC Series",
                "retailPrice": -3,
            }
        ],
        [
            {
                "armSkuName": "Standard_NC6",
                "type": "Consumption",
                "unitOfMeasure": "1 Hour",
                "skuName": "NC6",
                "productName": "NC Series",
                "retailPrice": [1],
            }
        ],
    ],
)
def test_malformed_price_items_during_refresh(
    cli: Any, http_server: Any, monkeypatch: pytest.MonkeyPatch, items: list[Any]
) -> None:
    server = http_server(lambda path, query: (200, {"Items": items, "NextPageLink": None}))
    monkeypatch.setenv("ADVISOR_AZURE_PRICES_URL", server.url + "/api/retail/prices")
    line = _error(cli, "catalog", "refresh", "--provider", "azure")
    assert "Azure Retail Prices API" in line
    assert not user_catalog_dir().exists() or not any(user_catalog_dir().iterdir())


# --- the Python API ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "limits",
    [
        {"probe_budget_usd": float("nan")},
        {"probe_budget_usd": float("inf")},
        {"budget_usd": float("inf")},
        {"deadline_s": float("nan")},
        {"timeout_s": float("nan")},
    ],
)
def test_suggest_options_refuse_nan_and_inf(limits: dict[str, float]) -> None:
    from advisor.errors import AdvisorError
    from advisor.options import SuggestOptions

    with pytest.raises(AdvisorError, match="must be"):
        SuggestOptions(model="fcn", **limits)
