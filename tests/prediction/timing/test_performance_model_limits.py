"""Host-bound predictions say which term limits them and carry the floor's uncertainty."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from perf_fixtures import SyntheticTraces, catalog, gpu_machine, traced_probe

from advisor.cli.main import cli
from advisor.prediction.timing import constants as C
from advisor.prediction.timing.model import predict

CAT = catalog()
# A tiny model whose DataLoader takes 20 ms per 512-sample batch on the local CPU.
SLOW_INPUT = {"data_s": 0.02, "input_bytes_per_sample": 1024.0}
TINY = dataclasses.replace(traced_probe(width=64, layers=2), fingerprint=dict(SLOW_INPUT))


def _width(iv: object) -> float:
    return iv.high / iv.value  # type: ignore[attr-defined]


def test_gpus_on_the_host_floor_tie_name_the_limit_and_widen() -> None:
    v100 = predict(TINY, gpu_machine("p3", "V100", 1, 3.06), CAT)
    a100 = predict(TINY, gpu_machine("p4", "A100-40GB", 1, 4.0), CAT)
    assert v100.bottleneck == a100.bottleneck == "input"
    # Same floor: the faster GPU predicts the same step (to within its device share).
    assert a100.phases.t2.value == pytest.approx(v100.phases.t2.value, rel=0.05)
    assert "host-bound (input pipeline): a faster GPU would not help" in v100.phases.note
    # The interval carries the host floor's uncertainty (the loader timed on another CPU).
    assert _width(v100.phases.t2) > C.OTHER_CPU_FACTOR * 0.9

    # Where the loader was not timed, the input prior's x/3 widens it further.
    untimed = dataclasses.replace(TINY, fingerprint={"input_bytes_per_sample": 4e5})
    prior = predict(untimed, gpu_machine("p3", "V100", 1, 3.06), CAT)
    assert prior.bottleneck == "input" and _width(prior.phases.t2) > _width(v100.phases.t2)

    heavy = traced_probe(width=4096)  # the loader: 1 us per sample
    bound = predict(heavy, gpu_machine("p3", "V100", 1, 3.06), CAT,
                    trace_store=SyntheticTraces(4096))  # fmt: skip
    assert bound.bottleneck == "device" and "a faster GPU" not in bound.phases.note


def test_predict_report_names_host_bound_machines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    machines = {
        "p3.2xlarge": gpu_machine("p3.2xlarge", "V100", 1, 3.06),
        "p4.xlarge": gpu_machine("p4.xlarge", "A100-40GB", 1, 4.0),
    }
    monkeypatch.setattr(
        "advisor.cli.predict._machines",
        lambda names, snapshot, filters: (CAT, [machines[n] for n in names.split(",")]),
    )
    path = tmp_path / "probe.json"
    path.write_text(dataclasses.replace(TINY, workload="fcn").to_json())
    args = ["predict", "-m", "fcn", "-b", "512", "-i", "p3.2xlarge,p4.xlarge", "--probe", str(path)]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    assert "host-bound (input pipeline): a faster GPU would not help" in result.output
    out = CliRunner().invoke(cli, [*args, "--json"])
    rows = json.loads(out.stdout)["machines"]
    assert {r["prediction"]["bottleneck"] for r in rows} == {"input"}


def test_predict_json_shows_startup_overheads_as_their_own_term(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from advisor.providers.catalog import load

    machines = {"ml.g5.xlarge": load().get("ml.g5.xlarge"), "p3.2xlarge": load().get("p3.2xlarge")}
    monkeypatch.setattr(
        "advisor.cli.predict._machines",
        lambda names, snapshot, filters: (load(), [machines[n] for n in names.split(",")]),
    )
    path = tmp_path / "probe.json"
    path.write_text(dataclasses.replace(TINY, workload="fcn").to_json())
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
    rows = {r["machine"].split(":")[-1]: r for r in json.loads(out.stdout)["machines"]}
    sm, ec2 = rows["ml.g5.xlarge"]["overheads"], rows["p3.2xlarge"]["overheads"]
    # fcn's dataset (its published sizes as fp32 tensors) is downloaded too (issue #14)
    download = "data download"
    assert [t["phase"] for t in sm["terms"]] == [
        "provisioning",
        "image pull + container start",
        download,
    ]
    # issue #27: a VM job brings the advisor's image too
    assert [t["phase"] for t in ec2["terms"]] == ["VM boot", "image pull + container start",
                                                  download]  # fmt: skip
    for r in rows.values():
        over, est = r["overheads"], r["estimate"]
        # The row's estimate is the whole job: the start-up on top of the training.
        assert over["job_cost_usd"]["value"] == pytest.approx(est["cost_usd"]["value"])
        assert over["job_wall_s"]["value"] == pytest.approx(est["runtime_s"]["value"])
        assert over["job_wall_s"]["value"] > over["training_s"]["value"]
    assert ec2["job_billed_s"]["value"] >= 60  # EC2's one-minute minimum
    table = CliRunner().invoke(cli, args)
    assert "start-up s" in table.output and "job cost USD" in table.output
