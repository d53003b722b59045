"""Several machines (issue #49): the hierarchical all-reduce, the start-up of N machines, the spot
risk of N, the network figures with their sources, and a step predicted on N machines."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from advisor.providers.catalog import load
from advisor.providers.network import FABRIC_PRIORS, network_of, rows
from perf_fixtures import SyntheticTraces, traced_probe

from advisor.errors import AdvisorError
from advisor.intervals import Interval
from advisor.prediction.step.plan import TrainingPlan
from advisor.prediction.timing.collective import Link
from advisor.prediction.timing.model import predict
from advisor.prediction.timing.nodes import (
    Cluster,
    hierarchical_allreduce,
    scaling,
    slowest_start,
    spot_overhead,
)

CAT = load()
GIB = 1024**3


@pytest.fixture(autouse=True)
def _fresh() -> None:
    from advisor.prediction.memo import forget_all

    forget_all()


def test_every_network_row_names_its_source_and_a_known_fabric() -> None:
    table = rows()
    assert len(table) >= 30
    for row in table:
        assert row.source.startswith("https://") and row.fabric in FABRIC_PRIORS
    p4d = network_of("aws", "ml.p4d.24xlarge")  # SageMaker's type is the VM's
    assert p4d is not None and (p4d.gbps, p4d.fabric) == (400, "efa")
    assert network_of("azure", "ND96isr_H100_v5").fabric == "infiniband"  # type: ignore[union-attr]
    assert network_of("aws", "g4dn.xlarge") is None  # no cited figure: one machine only


def test_hierarchical_all_reduce_by_hand() -> None:
    """8 GPUs x 4 machines, 1 GiB of gradients, 100 GB/s inside, p4d's 400 Gbps EFA across."""
    net = network_of("aws", "p4d.24xlarge")
    assert net is not None
    cluster = Cluster(4, 8, net)
    link = Link(100e9, "nvlink", latency_s=(20e-6, 1e-6))
    got = hierarchical_allreduce(GIB, cluster, link, buckets=1)
    assert got["inside"] == pytest.approx(2 * 7 / 8 * GIB / 100e9 + 20e-6 + 7 * 1e-6)
    achieved = 400e9 / 8 * FABRIC_PRIORS["efa"][1]
    assert got["across"] == pytest.approx(2 * 3 / 4 * GIB / achieved + 2 * 3 * 20e-6)
    zero3 = hierarchical_allreduce(GIB, cluster, link, 1, traffic=1.5)
    hsdp = hierarchical_allreduce(GIB, cluster, link, 1, traffic=1.5, replicate=True)
    assert zero3["across"] == pytest.approx(1.5 * got["across"])
    assert hsdp["across"] == pytest.approx(got["across"]) and hsdp["inside"] == zero3["inside"]
    one = hierarchical_allreduce(GIB, Cluster(1, 8, net), link, 1)
    assert one["across"] == 0 and one["inside"] == got["inside"]


def test_n_machines_start_as_the_slowest_and_risk_n_times_the_interruptions() -> None:
    one = Interval(100.0, 50.0, 300.0)
    assert slowest_start(one, 1) == one
    two, eight = slowest_start(one, 2), slowest_start(one, 8)
    assert one.value < two.value < eight.value < one.high * 1.2
    assert eight.high > one.high
    assert spot_overhead(0.1, 8) == pytest.approx(0.8)


def test_weak_scaling_is_linear_without_communication() -> None:
    assert scaling(1.0, 0.0, 0.0, 4) == pytest.approx(4.0)
    assert scaling(1.0, 0.1, 0.3, 4) == pytest.approx(4 / 1.2)


def _predict(
    machine_key: str, nodes: int, plan: TrainingPlan | None = None, batch: int = 4096
) -> object:
    p = traced_probe(batch=batch, width=4096, layers=4)
    machine = next(m for m in CAT.instances if m.key == machine_key)
    store = SyntheticTraces(width=4096, layers=4)
    return predict(p, machine, CAT, batch, trace_store=store, plan=plan, nodes=nodes)


def test_a_step_on_four_machines_splits_the_batch_and_pays_the_network() -> None:
    one = _predict("ec2:p4d.24xlarge", 1)
    four = _predict("ec2:p4d.24xlarge", 4)
    assert (one.devices, four.devices) == (8, 32)  # type: ignore[attr-defined]
    assert four.per_device_batch == 128  # type: ignore[attr-defined]
    parts = four.breakdown  # type: ignore[attr-defined]
    assert parts["allreduce"] == pytest.approx(
        parts["allreduce_inside"] + parts["allreduce_across"]
    )
    assert parts["allreduce_across"] > 0 and "allreduce_across" not in one.breakdown  # type: ignore[attr-defined]
    # 256 MB of gradients over 400 Gbps EFA outlast 128 samples' compute: not faster, and said so
    assert four.phases.t2.value >= one.phases.t2.value  # type: ignore[attr-defined]
    assert four.bottleneck == "allreduce"  # type: ignore[attr-defined]
    big_one, big_four = (_predict("ec2:p4d.24xlarge", n, batch=65536) for n in (1, 4))
    assert big_four.phases.t2.value < big_one.phases.t2.value / 2  # type: ignore[attr-defined]
    zero3 = TrainingPlan(sharding="parameters")
    hsdp = dataclasses.replace(zero3, replicate="nodes")
    across = {
        p.replicate: _predict("ec2:p4d.24xlarge", 4, p).breakdown["allreduce_across"]  # type: ignore[attr-defined]
        for p in (zero3, hsdp)
    }
    assert across["nodes"] < across["none"]


def test_a_type_without_a_cited_network_is_refused_on_several_machines() -> None:
    with pytest.raises(AdvisorError, match="no cited network figure"):
        _predict("ec2:g4dn.xlarge", 2)


def test_a_forecast_on_four_machines_pays_four_prices_the_slowest_start_and_more_spot_risk() -> (
    None
):
    from advisor.prediction.forecast.forecast import forecast_machine

    p = traced_probe(batch=65536, width=4096, layers=4)
    machine = next(m for m in CAT.instances if m.key == "ec2:p4d.24xlarge")
    store = SyntheticTraces(width=4096, layers=4)

    def run(nodes: int, spot: bool = False) -> object:
        return forecast_machine(p, machine, CAT, 65536, 10, 500 * 65536, 0, spot=spot,
                                trace_store=store, nodes=nodes)  # fmt: skip

    one, four = run(1), run(4)
    assert four.price_per_hour == pytest.approx(4 * one.price_per_hour)  # type: ignore[attr-defined]
    assert four.overheads.wall.value > one.overheads.wall.value  # type: ignore[attr-defined]
    assert four.memory.devices == 32 and four.to_dict()["nodes"] == 4  # type: ignore[attr-defined]
    assert four.estimate.runtime.value < one.estimate.runtime.value / 2  # type: ignore[attr-defined]
    spot_one, spot_four = run(1, True), run(4, True)
    extra = {
        n: spot.job.training.value / plain.job.training.value  # type: ignore[attr-defined]
        for n, spot, plain in ((1, spot_one, one), (4, spot_four, four))
    }
    assert extra[1] == pytest.approx(1.1) and extra[4] == pytest.approx(1.4)


def test_advisor_predict_nodes_shows_the_machines_and_leaves_out_unlinked_types(
    tmp_path: Path,
) -> None:
    from cli_run import run
    from perf_fixtures import probe_file

    probe = str(probe_file(tmp_path, batch=512))
    machines = "ec2:p4d.24xlarge,ec2:g4dn.xlarge"
    result = run("predict", "-m", "fcn", "-b", "4096", "-i", machines, "--probe", probe,
                 "--nodes", "4", "--precision", "fp32", "--json")  # fmt: skip
    assert result.code == 0, result
    out = json.loads(result.out)
    (row,) = out["machines"]
    assert row["machine"] == "ec2:p4d.24xlarge" and row["nodes"] == 4
    assert row["prediction"]["devices"] == 32
    assert any("g4dn.xlarge: left out on 4 machines" in n for n in out["notes"])
    table = run("predict", "-m", "fcn", "-b", "4096", "-i", machines, "--probe", probe,
                "--nodes", "4", "--precision", "fp32")  # fmt: skip
    assert table.code == 0 and "4 x 8x A100-40GB" in table.out
