"""The service's CLI commands through click (CliRunner): token create/list/revoke, clear
errors for a worker with nothing to do and a PostgreSQL URL without its driver."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from advisor.cli.main import cli, main
from advisor.service import auth
from advisor.storage.checks import storage_driver_url


def test_token_create_list_revoke(sqlite_url: str) -> None:
    runner = CliRunner()
    created = runner.invoke(cli, ["token", "create", "bob", "--storage", sqlite_url])
    assert created.exit_code == 0, created.output
    token = created.output.strip()
    assert token.startswith("adv_") and len(token) > 40
    assert auth.verify(sqlite_url, token) == auth.Caller("bob", "default")
    listed = runner.invoke(cli, ["token", "list", "--json", "--storage", sqlite_url])
    rows = json.loads(listed.output)
    assert [r["name"] for r in rows] == ["bob"] and rows[0]["revoked"] is None
    assert token not in listed.output
    assert runner.invoke(cli, ["token", "revoke", "bob", "--storage", sqlite_url]).exit_code == 0
    assert auth.verify(sqlite_url, token) is None


def test_duplicate_token_name_is_a_one_line_error(
    sqlite_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    main(["token", "create", "bob", "--storage", sqlite_url])
    with pytest.raises(SystemExit) as exc:
        main(["token", "create", "bob", "--storage", sqlite_url])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "exists already" in err and "Traceback" not in err


def test_worker_without_queue_or_study_is_a_clear_error(
    sqlite_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["worker", "--storage", sqlite_url])
    assert exc.value.code == 2
    assert "--redis URL or --join FILE" in capsys.readouterr().err


def test_worker_join_rejects_a_bad_request_file(
    tmp_path: Path, sqlite_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "req.json"
    bad.write_text(json.dumps({"model": "fcn", "colour": "red"}))
    with pytest.raises(SystemExit) as exc:
        main(["worker", "--join", str(bad), "--storage", sqlite_url])
    assert exc.value.code == 2
    assert "is not a suggestion request" in capsys.readouterr().err


def test_postgresql_urls_go_through_psycopg3() -> None:
    pytest.importorskip("psycopg")
    assert storage_driver_url("postgresql://u:p@h/db") == "postgresql+psycopg://u:p@h/db"
    assert storage_driver_url("postgres://h/db") == "postgresql+psycopg://h/db"
    assert storage_driver_url("sqlite:///x.db") == "sqlite:///x.db"


def test_a_missing_psycopg_is_one_line_naming_the_extra(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for driver in ("psycopg", "psycopg2"):  # as on a machine without either driver
        monkeypatch.setitem(sys.modules, driver, None)
    with pytest.raises(SystemExit) as exc:
        main(["serve", "--storage", "postgresql://u:pw@127.0.0.1:1/db"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "which is not installed" in err and "advisor[postgres]" in err and ":pw@" not in err


def test_help_lists_the_service_commands() -> None:
    out = CliRunner().invoke(cli, ["--help"]).output
    for name in ("serve", "worker", "token"):
        assert f"  {name} " in out


def test_token_of_a_team_and_the_storage_from_a_file_or_the_environment(
    sqlite_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    secret = tmp_path / "storage-url"
    secret.write_text(sqlite_url + "\n")
    runner = CliRunner()
    made = runner.invoke(
        cli, ["token", "create", "carol", "--team", "research", "--storage-file", str(secret)]
    )
    assert made.exit_code == 0, made.output
    assert auth.verify(sqlite_url, made.output.strip()) == auth.Caller("carol", "research")
    listed = runner.invoke(cli, ["token", "list", "--json"], env={"ADVISOR_STORAGE": sqlite_url})
    assert [(r["name"], r["team"]) for r in json.loads(listed.output)] == [("carol", "research")]
    for args in (
        ["token", "create", "dave", "--team", "Not A Team", "--storage", sqlite_url],
        ["token", "list", "--storage", sqlite_url, "--storage-file", str(secret)],
        ["token", "list", "--storage-file", str(tmp_path / "missing")],
    ):
        with pytest.raises(SystemExit) as exc:
            main(args)
        assert exc.value.code == 2
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
