"""Issue #50, section 6: the service's validation gives the right one-line reason, over HTTP
(FastAPI's TestClient, SQLite, replay back end). Before: ``budget_usd: 1e308`` was accepted
and run; ``Infinity`` was refused as "must be > 0, got inf" (a 400 from deep inside); a body
that is not JSON named a character offset ("15") as the field."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from advisor.service import auth
from advisor.service.app import Settings, create_app
from advisor.service.dispatch import ThreadDispatcher


@pytest.fixture
def client(sqlite_url: str, replay: str) -> Iterator[Any]:
    dispatcher = ThreadDispatcher(sqlite_url, threads=1, backend=replay)
    with TestClient(create_app(Settings(sqlite_url, dispatcher))) as c:
        c.headers.update(
            {
                "Authorization": f"Bearer {auth.create_token(sqlite_url, 'alice')}",
                "Content-Type": "application/json",
            }
        )
        yield c
    dispatcher.close()


def _problems(client: Any, body: str, path: str = "/v1/suggestions") -> dict[str, str]:
    r = client.post(path, content=body.encode())
    assert r.status_code == 422, r.text
    return {d["field"]: d["problem"] for d in r.json()["detail"]}


@pytest.mark.parametrize(
    ("body", "field", "words"),
    [
        ('{"model": "fcn", "budget_usd": 1e308}', "budget_usd", "less than or equal to 1000000000"),
        ('{"model": "fcn", "budget_usd": 1000000001}', "budget_usd", "less than or equal to"),
        ('{"model": "fcn", "budget_usd": Infinity}', "budget_usd", "finite number"),
        ('{"model": "fcn", "budget_usd": -Infinity}', "budget_usd", "finite number"),
        ('{"model": "fcn", "budget_usd": NaN}', "budget_usd", "finite number"),
        ('{"model": "fcn", "budget_usd": 1e400}', "budget_usd", "finite number"),  # decoded as inf
        ('{"model": "fcn", "probe_budget_usd": 1e308}', "probe_budget_usd", "less than or equal"),
        ('{"model": "fcn", "value_of_time": Infinity}', "value_of_time", "finite number"),
        ('{"model": "fcn", "deadline_s": 1e300}', "deadline_s", "less than or equal to 31622400"),
        ('{"model": "fcn", "timeout_s": Infinity}', "timeout_s", "finite number"),
        ('{"model": "fcn", "n_train": 1e30}', "n_train", "integer"),
        ('{"model": "fcn", "n_train": 10000000000}', "n_train", "less than or equal"),
    ],
)
def test_budgets_and_durations_are_finite_and_bounded(
    client: Any, body: str, field: str, words: str
) -> None:
    problems = _problems(client, body)
    assert list(problems) == [field] and words in problems[field], problems
    assert client.get("/v1/jobs").json() == []  # nothing was queued


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (
            '{"model": "fcn",, }',
            "Expecting property name enclosed in double quotes at character 16",
        ),
        ('{"model": "fcn"', "at character"),
        ("model=fcn", "Expecting value at character 0"),
    ],
)
def test_a_body_that_is_not_json_names_the_body(client: Any, body: str, reason: str) -> None:
    problems = _problems(client, body)
    assert list(problems) == ["body"], problems
    assert "not valid JSON" in problems["body"] and reason in problems["body"], problems
    assert "\n" not in problems["body"]


def test_other_bodies_refuse_infinity_too(client: Any) -> None:
    machine = (
        '{"name": "rig", "gpus": "4xRTX4090", "purchase_usd": Infinity, "lifetime": "3y", '
        '"power_w": 1800, "usd_per_kwh": 0.3}'
    )
    assert "finite number" in _problems(client, machine, "/v1/hardware")["purchase_usd"]
    r = client.get("/v1/catalog", params={"max_price": "inf"})
    assert r.status_code == 422 and "finite number" in r.text, r.text


def test_a_budget_at_the_bound_is_accepted(client: Any) -> None:
    r = client.post("/v1/suggestions", content=b'{"model": "fcn", "budget_usd": 1e9, "trials": 1}')
    assert r.status_code == 202, r.text
