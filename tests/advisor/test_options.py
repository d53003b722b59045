"""One declaration of `advisor suggest`'s options: the CLI flags, the HTTP API's request fields
and the ``--server`` request body all follow ``advisor.options.OPTIONS``."""

from __future__ import annotations

import dataclasses

import pytest

from advisor.cli.suggest import suggest as suggest_command
from advisor.options import OPTIONS, SuggestOptions, request_body
from advisor.service.schemas import SuggestRequest


def test_every_option_is_declared_once() -> None:
    fields = {f.name for f in dataclasses.fields(SuggestOptions)}
    assert set(OPTIONS) == fields


def test_the_cli_offers_every_declared_flag_with_its_help() -> None:
    by_flag = {opt: param for param in suggest_command.params for opt in param.opts}
    for name, doc in OPTIONS.items():
        assert doc.flag in by_flag, f"{name}: {doc.flag} is not a flag of advisor suggest"
        assert getattr(by_flag[doc.flag], "help", None) == doc.help, name


def test_the_http_api_takes_exactly_the_service_options() -> None:
    service = {name for name, doc in OPTIONS.items() if doc.service}
    assert set(SuggestRequest.model_fields) == service
    for name in service:
        assert SuggestRequest.model_fields[name].description == OPTIONS[name].help, name


@pytest.mark.parametrize(
    "options",
    [
        SuggestOptions(model="fcn", budget_usd=5),
        SuggestOptions(
            model="simple-cnn",
            deadline_s=7200,
            objective="pareto",
            epochs_at=((256, 13), (2048, 16)),
            sampler="random",
            seed=3,
            trials=7,
            timeout_s=600,
            snapshot="2021-02",
            study_name="x",
            probe_iterations=5,
            n_train=1000,
            n_val=100,
            screen=False,
            data_gb=1.5,
        ),
    ],
)
def test_the_server_request_carries_every_option_the_service_takes(
    options: SuggestOptions,
) -> None:
    body = request_body(options)
    SuggestRequest(**body)  # the service accepts it
    rebuilt = SuggestOptions(**body)
    for name, doc in OPTIONS.items():
        if doc.service and name != "space":
            assert getattr(rebuilt, name) == getattr(options, name), name
