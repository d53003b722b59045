"""One pricing path: the rules, and `advisor predict --spot` agreeing with `advisor suggest`'s
scorer for the same machine and probe."""

from __future__ import annotations

import csv
import dataclasses
import json
import re
from pathlib import Path

import optuna
import pytest
from advisor.providers import catalog, pricing
from advisor.providers.catalog import InstanceType
from click.testing import CliRunner
from perf_fixtures import FakeCatalog, gpu_machine, probe, with_synthetic_trace

from advisor.cli.main import cli
from advisor.evaluation.candidates import Candidate
from advisor.evaluation.local import LocalBackend
from advisor.intervals import Interval
from advisor.options import SuggestOptions, workload_info
from advisor.prediction.run.iteration_model import estimate

# issue #26: a probe made ready for prediction (its operator trace and loader time), so
# no trace is taken here (no torch import)
TRACE = {"data_s": 0.004}
P3 = dataclasses.replace(gpu_machine("p3.2xlarge", "V100", 1, 3.06), spot_usd_per_h=0.918)
VERTEX_T4 = dataclasses.replace(
    gpu_machine("n1-standard-8+t4", "V100", 1, 0.73),
    provider="gcp",
    service="vertex",
    spot_usd_per_h=0.25,
)


def test_spot_overhead_is_added_to_time_and_cost() -> None:
    run = pricing.price_run(Interval(1000.0, 900.0, 1100.0), 0.918, spot=True, service="ec2")
    assert run.runtime == Interval(1100.0, 900.0, 1430.0)
    assert run.cost.value == pytest.approx(1100.0 * 0.918 / 3600)
    assert run.cost.high == pytest.approx(1430.0 * 0.918 / 3600)
    assert run.notes()["spot_restart_overhead"] == {"expected": 0.10, "high": 0.30}
    on_demand = pricing.price_run(Interval(1000.0, 900.0, 1100.0), 3.06, service="ec2")
    assert on_demand.runtime == Interval(1000.0, 900.0, 1100.0) and on_demand.notes() == {}


def test_billing_minimum_and_increment() -> None:
    ec2 = pricing.billing_rule("ec2")
    assert ec2.billed(10.0) == 60.0 and ec2.billed(61.5) == 61.5 and ec2.billed(0.0) == 0.0
    vertex = pricing.billing_rule("vertex")
    assert vertex.billed(31.0) == 60.0 and vertex.billed(60.0) == 60.0
    assert pricing.billing_rule("local").billed(5.0) == 5.0
    assert pricing.billing_rule("unknown-service").source.startswith("prior")
    short = pricing.price_run(Interval(10.0, 8.0, 12.0), 3.6, service="ec2")
    assert short.cost == Interval(0.06, 0.06, 0.06)  # 60 s billed at USD 3.60/h
    assert short.runtime == Interval(10.0, 8.0, 12.0)  # the run itself is not longer


def _stated(source: str) -> tuple[float, float]:
    """(increment, minimum) seconds as a billing rule's source text states them."""
    text = source.lower()
    if "per minute" in text:
        increment = 60.0
    elif m := re.search(r"(\d+) s increments", text):
        increment = float(m.group(1))
    else:
        assert "per second" in text or "per-second" in text or "not billed" in text, source
        increment = 1.0
    if m := re.search(r"(\d+) (s|min) minimum", text):
        minimum = float(m.group(1)) * (60 if m.group(2) == "min" else 1)
    else:  # no minimum stated: one increment when billed in increments, else none
        minimum = increment if increment > 1 else 0.0
    return increment, minimum


@pytest.mark.parametrize("service", [*pricing.BILLING, "unknown-service"])
def test_every_billing_rule_is_what_its_source_says(service: str) -> None:
    rule = pricing.billing_rule(service)
    assert (rule.increment_s, rule.minimum_s) == _stated(rule.source), rule
    short = rule.minimum_s / 2 + 0.5  # under the minimum, or under one increment
    coarse = rule.increment_s > 1 or rule.minimum_s > 0
    assert rule.billed(short) == (max(rule.minimum_s, rule.increment_s) if coarse else short)


def _csv_rows() -> list[dict[str, str]]:
    """The snapshot's CSV rows of the loaded catalog's regions, read here without the catalog."""
    loaded = catalog.load()
    folder = Path(catalog.__file__).parent / "data" / loaded.snapshot
    rows = [r for f in sorted(folder.glob("*.csv")) for r in csv.DictReader(f.open())]
    return [
        r for r in rows if loaded.get(f"{r['service']}:{r['instance_type']}").region == r["region"]
    ]


@pytest.mark.parametrize("row", _csv_rows()[::25], ids=lambda r: r["instance_type"])
def test_an_hour_costs_the_catalog_rows_list_price(row: dict[str, str]) -> None:
    machine = catalog.load().get(f"{row['service']}:{row['instance_type']}")
    hour = Interval.exact(3600.0)
    assert pricing.price_on(machine, hour).cost.value == pytest.approx(
        float(row["on_demand_usd_per_h"]), rel=1e-12
    )
    if row["spot_usd_per_h"]:  # on spot the +10 % restart overhead (a prior) on the hour
        assert pricing.price_on(machine, hour, spot=True).cost.value == pytest.approx(
            float(row["spot_usd_per_h"]) * 1.1, rel=1e-12
        )


def test_negative_price_is_rejected() -> None:
    with pytest.raises(ValueError, match="price_per_hour"):
        pricing.price_run(Interval.exact(1.0), -1.0)


def test_iteration_model_prices_through_the_same_path() -> None:
    p = probe()
    est = estimate(p, 40_512, 212, 3, 512, 0.918, spot=True, service="ec2")
    plain = estimate(p, 40_512, 212, 3, 512)
    run = pricing.price_run(plain.runtime, 0.918, spot=True, service="ec2")
    assert est.runtime == run.runtime and est.cost == run.cost


def _suggest_scores(machine: InstanceType, epochs: int) -> tuple[Interval, Interval]:
    """What `advisor suggest`'s scorer gives (machine on spot) from the same probe."""
    p = with_synthetic_trace(dataclasses.replace(probe(), fingerprint=dict(TRACE)))
    backend = LocalBackend(
        optuna.storages.InMemoryStorage(),
        catalog=FakeCatalog(),
        run_probe=lambda request: p,
    )
    # the workload as `advisor suggest` builds it (its data size for the download term too)
    wl = workload_info(SuggestOptions("fcn", n_train=p.n_train, n_val=p.n_val, epochs=epochs))
    ev = backend.evaluate(wl, Candidate(machine, spot=True), 512, {})
    assert ev.ok and ev.runtime is not None and ev.cost is not None, ev.error
    return ev.runtime, ev.cost


@pytest.mark.parametrize("machine", [P3, VERTEX_T4], ids=["ec2", "vertex"])
def test_predict_spot_agrees_with_suggest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, machine: InstanceType
) -> None:
    path = tmp_path / "probe.json"
    path.write_text(
        with_synthetic_trace(dataclasses.replace(probe(), fingerprint=dict(TRACE))).to_json()
    )
    monkeypatch.setattr(
        "advisor.cli.predict._machines", lambda names, snapshot, filters: (FakeCatalog(), [machine])
    )
    args = ["predict", "-m", "fcn", "-b", "512", "-i", machine.instance_type, "--epochs", "3"]
    result = CliRunner().invoke(cli, [*args, "--spot", "--probe", str(path), "--json"])
    assert result.exit_code == 0, result.output
    (row,) = json.loads(result.stdout)["machines"]
    runtime, cost = _suggest_scores(machine, epochs=3)
    # issue #14: suggest scores the whole job (start-up + training), predict shows it as the
    # job's total next to the training estimate; the two agree to the last digit.
    job = row["overheads"]
    assert job["job_wall_s"] == pytest.approx(runtime.to_dict(), rel=1e-12)
    assert job["job_cost_usd"] == pytest.approx(cost.to_dict(), rel=1e-12)
    assert [t["phase"] for t in job["terms"]][-1] == "data download"  # fcn's size, both
    # The spot overhead is in both (predict used to leave it out), on the training only.
    on_demand = {k: v for k, v in row["sweep"]["3"]["breakdown"].items() if k != "startup"}
    assert job["training_s"]["value"] == pytest.approx(sum(on_demand.values()) * 1.10, rel=1e-9)
    assert runtime.value == pytest.approx(
        job["startup_s"]["value"] + sum(on_demand.values()) * 1.10, rel=1e-9
    )
    # issue #27: predict's own estimate is the whole job too (one cost rule, no training-alone
    # price with its own billing minimum)
    assert row["estimate"]["runtime_s"] == pytest.approx(job["job_wall_s"], rel=1e-12)
    assert row["estimate"]["cost_usd"] == pytest.approx(job["job_cost_usd"], rel=1e-12)
