"""Issues #26 and #27: one prediction path. The CLI (`advisor predict`), the Python API
(`advisor.predict`), the scorer inside `advisor suggest` (through `advisor.suggest` and its
ranking rows) and the service (`POST /v1/predict` over HTTP) give the same times and costs for
the same workload and probe -- GPU rows from the kernel model on the probe's operator trace, a
multi-GPU row at its per-device batch, a managed service and a CPU machine."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import optuna
import pytest
from advisor.probes.result import ProbeRequest, ProbeResult
from advisor.search_spaces.loader import default_space
from advisor.search_spaces.space import MachineFilter
from click.testing import CliRunner
from fastapi.testclient import TestClient
from perf_fixtures import with_synthetic_trace

import advisor
from advisor.cli.main import cli
from advisor.evaluation.local import LocalBackend
from advisor.service import auth
from advisor.service.app import Settings, create_app
from advisor.service.dispatch import ThreadDispatcher

BATCH = 256
MACHINES = (
    "ec2:g4dn.xlarge",  # T4: kernels measured
    "compute-engine:a2-highgpu-1g",  # A100 40 GB: its chip measured on another board
    "ec2:g6.xlarge",  # L4: spec extrapolation
    "ec2:g5.12xlarge",  # 4x A10G: the step traced at the per-device batch, all-reduce
    "sagemaker:ml.g5.xlarge",  # a managed service's start-up terms
    "ec2:c5.4xlarge",  # a CPU machine: the CPU probe scaled
)


def the_probe() -> ProbeResult:
    """fcn at batch 256 on this machine, made ready for prediction (its operator trace and
    loader time), as every path receives it."""
    step = 0.1
    p = ProbeResult(
        workload="fcn", framework="torch", batch_size=BATCH, device="cpu", threads=1,
        init_s=1.0, iteration_s=(step * 5, *([step] * 7)), validation_s=(0.2, 0.1),
        validation_samples_measured=212, n_train=40_512, n_val=212, wall_s=3.0,
        flops_per_iteration=2e8 * BATCH, parameters=4 * 2048 * 2048,
        fingerprint={"data_s": 0.004, "input_bytes_per_sample": 16384.0},
    )  # fmt: skip
    return with_synthetic_trace(p)


def a_real_probe() -> ProbeResult:
    """fcn at batch 256 probed for real on this CPU (three iterations), its own operator
    trace of the built-in model and its DataLoader timed: what `advisor probe` records."""
    from advisor.probes.runner import run_probe

    from advisor.prediction.step.ready import traced

    request = ProbeRequest(
        workload="fcn", batch_size=BATCH, iterations=3, threads=1, gradient_noise=False
    )
    probe, notes = traced(run_probe(request))
    assert probe.ok and probe.operator_trace is not None and not notes, (probe.error, notes)
    return probe


def _by_machine(rows: list[dict[str, Any]], key: str = "machine") -> dict[str, dict[str, Any]]:
    return {r[key]: r for r in rows}


def _close(a: dict[str, float], b: dict[str, float]) -> None:
    assert (a["value"], a["low"], a["high"]) == pytest.approx(
        (b["value"], b["low"], b["high"]), rel=1e-9
    )


@pytest.mark.slow
@pytest.mark.parametrize("source", ["synthetic trace", "real probe"])
def test_cli_api_suggest_and_service_give_the_same_times_and_costs(
    tmp_path: Path, _advisor_home: Path, source: str
) -> None:
    probe = the_probe() if source == "synthetic trace" else a_real_probe()
    path = tmp_path / "probe.json"
    path.write_text(probe.to_json())
    epochs = 13  # fcn's published epochs to stabilise at batch 256 (docs/method.md 2.3)

    # 1. the CLI
    out = CliRunner().invoke(cli, ["predict", "-m", "fcn", "-b", str(BATCH), "-i",
                                   ",".join(MACHINES), "--probe", str(path), "--json"])  # fmt: skip
    assert out.exit_code == 0, out.output
    cli_rows = _by_machine(json.loads(out.stdout)["machines"])

    # 2. the Python API
    api = advisor.predict("fcn", BATCH, list(MACHINES), probe=probe)
    assert api.epochs == epochs
    api_rows = _by_machine(api.to_dict()["machines"])

    # 3. the service, over HTTP
    _advisor_home.mkdir(parents=True, exist_ok=True)
    url = f"sqlite:///{_advisor_home / 'studies.db'}"
    token = auth.create_token(url, "ci")
    dispatcher = ThreadDispatcher(url)
    body = {"probe": json.loads(probe.to_json()), "instances": list(MACHINES)}
    with TestClient(create_app(Settings(url, dispatcher))) as client:
        r = client.post("/v1/predict", json=body, headers={"Authorization": f"Bearer {token}"})
    dispatcher.close()
    assert r.status_code == 200, r.text
    service_rows = _by_machine(r.json()["machines"])

    # 4. the scorer inside advisor suggest, through the Python API: its ranking rows
    def run_probe(request: ProbeRequest) -> ProbeResult:
        assert request.batch_size == BATCH
        return probe  # the same probe, with the same trace

    backend = LocalBackend(optuna.storages.InMemoryStorage(), run_probe=run_probe)
    space = dataclasses.replace(
        default_space("fcn"),
        machines=MachineFilter(instance_types=MACHINES, spot=False),
        batch_sizes=(BATCH,),
    )
    report = advisor.suggest(model="fcn", space=space, budget_usd=100.0, backend=backend)
    suggest_rows = {
        r["machine"]: r for r in report["ranking"] if r["batch_size"] == BATCH and not r["spot"]
    }

    for machine in MACHINES:
        cli_row, api_row, svc_row = cli_rows[machine], api_rows[machine], service_rows[machine]
        for other in (api_row, svc_row):
            _close(cli_row["estimate"]["runtime_s"], other["estimate"]["runtime_s"])
            _close(cli_row["estimate"]["cost_usd"], other["estimate"]["cost_usd"])
            assert cli_row["prediction"]["basis"] == other["prediction"]["basis"]
        # suggest's row: the whole job (start-up + training), by the one cost rule
        _close(cli_row["estimate"]["runtime_s"], suggest_rows[machine]["runtime_s"])
        _close(cli_row["estimate"]["cost_usd"], suggest_rows[machine]["cost_usd"])
        assert suggest_rows[machine]["epochs"] == epochs
        # the JSON carries the basis ("" for the CPU machine: no device time)
        assert suggest_rows[machine]["basis"] == cli_row["prediction"]["basis"]
        assert suggest_rows[machine]["source"].startswith("modelled")
    # the GPU rows came from the kernel model, the multi-GPU row at its per-device batch
    multi = cli_rows["ec2:g5.12xlarge"]["prediction"]
    assert multi["per_device_batch"] == BATCH // 4 and multi["breakdown"]["allreduce"] > 0
    assert cli_rows["ec2:g6.xlarge"]["prediction"]["basis"].endswith("spec extrapolation for L4")
    assert cli_rows["ec2:c5.4xlarge"]["prediction"]["kind"] == "cpu"
