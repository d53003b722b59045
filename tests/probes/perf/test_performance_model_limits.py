"""Host-bound predictions say which term limits them and carry the floor's uncertainty."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from advisor.probes.perf import constants as C
from advisor.probes.perf.model import predict
from click.testing import CliRunner
from perf_fixtures import FakeCatalog, gpu_machine, probe

from advisor.cli.main import cli

CAT = FakeCatalog()
# A tiny model whose DataLoader takes 20 ms per 512-sample batch on the local CPU.
SLOW_INPUT = {"ops_per_iteration": 100, "activation_bytes_per_sample": 1e4, "data_s": 0.02}
TINY = dataclasses.replace(
    probe(flops_per_sample=2e5, parameters=10_000), fingerprint=dict(SLOW_INPUT)
)


def _width(iv: object) -> float:
    return iv.high / iv.value  # type: ignore[attr-defined]


def test_gpus_on_the_host_floor_tie_name_the_limit_and_widen() -> None:
    v100 = predict(TINY, gpu_machine("p3", "V100", 1, 3.06), CAT)
    a100 = predict(TINY, gpu_machine("p4", "A100", 1, 4.0), CAT)
    assert v100.bottleneck == a100.bottleneck == "input"
    # Same floor: the faster GPU predicts the same step (to within its device share).
    assert a100.phases.t2.value == pytest.approx(v100.phases.t2.value, rel=0.05)
    assert "host-bound (input pipeline): a faster GPU would not help" in v100.phases.note
    # The interval carries the host floor's uncertainty on top of the GPU model's.
    assert _width(v100.phases.t2) > C.FITTED_MODEL_FACTOR * 1.1

    fast_input = dataclasses.replace(TINY, fingerprint={**SLOW_INPUT, "data_s": 0.0})
    heavy = dataclasses.replace(fast_input, flops_per_iteration=5e9 * 512)
    bound = predict(heavy, gpu_machine("p3", "V100", 1, 3.06), CAT)
    assert bound.bottleneck in ("compute", "memory")
    assert _width(bound.phases.t2) < _width(v100.phases.t2)


def test_predict_report_names_host_bound_machines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    machines = {
        "p3.2xlarge": gpu_machine("p3.2xlarge", "V100", 1, 3.06),
        "p4.xlarge": gpu_machine("p4.xlarge", "A100", 1, 4.0),
    }
    monkeypatch.setattr(
        "advisor.cli.predict._machines",
        lambda names, snapshot: (CAT, [machines[n] for n in names.split(",")]),
    )
    path = tmp_path / "probe.json"
    path.write_text(TINY.to_json())
    args = ["predict", "-m", "fcn", "-b", "512", "-i", "p3.2xlarge,p4.xlarge", "--probe", str(path)]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    assert "host-bound (input pipeline): a faster GPU would not help" in result.output
    out = CliRunner().invoke(cli, [*args, "--json"])
    rows = json.loads(out.output)["machines"]
    assert {r["prediction"]["bottleneck"] for r in rows} == {"input"}


def test_predict_json_shows_startup_overheads_as_their_own_term(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from advisor.providers.catalog import load

    machines = {"ml.g5.xlarge": load().get("ml.g5.xlarge"), "p3.2xlarge": load().get("p3.2xlarge")}
    monkeypatch.setattr(
        "advisor.cli.predict._machines",
        lambda names, snapshot: (load(), [machines[n] for n in names.split(",")]),
    )
    path = tmp_path / "probe.json"
    path.write_text(TINY.to_json())
    args = [
        "predict",
        "-m",
        "fcn",
        "-b",
        "512",
        "-i",
        "ml.g5.xlarge,p3.2xlarge",
        "--probe",
        str(path),
    ]
    out = CliRunner().invoke(cli, [*args, "--json"])
    assert out.exit_code == 0, out.output
    rows = {r["machine"].split(":")[-1]: r for r in json.loads(out.output)["machines"]}
    sm, ec2 = rows["ml.g5.xlarge"]["overheads"], rows["p3.2xlarge"]["overheads"]
    # fcn's dataset (its published sizes as fp32 tensors) is downloaded too (issue #14)
    download = "data download"
    assert [t["phase"] for t in sm["terms"]] == [
        "provisioning",
        "image pull + container start",
        download,
    ]
    assert [t["phase"] for t in ec2["terms"]] == ["VM boot", download]
    for r in rows.values():
        over, est = r["overheads"], r["estimate"]
        # The job costs at least the training, and takes the start-up on top of it.
        assert over["job_cost_usd"]["value"] >= est["cost_usd"]["value"]
        assert over["job_wall_s"]["value"] > est["runtime_s"]["value"]
    assert ec2["job_billed_s"]["value"] >= 60  # EC2's one-minute minimum
    table = CliRunner().invoke(cli, args)
    assert "start-up s" in table.output and "job cost USD" in table.output
