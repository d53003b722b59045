"""Issue #27: one cost rule for every row and every table -- the service's start-up terms
(a VM's image pull included), the billing rule applied once to the whole job -- the same in
`advisor predict`, `advisor suggest`'s scorer, the per-epoch tables and imported tuning trials;
a remote probe job's measured start-up replaces the priors; a free machine is no divisor."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import optuna
import pytest
from advisor.probes.result import ProbeResult
from advisor.providers.catalog import load, local_machine
from advisor.providers.overheads import (
    MEASURED,
    PULL,
    SERVICES,
    Overhead,
    bill_measured_job,
    overheads_for,
    run_overheads,
)
from advisor.providers.pricing import billing_rule, price_run, usd
from advisor.providers.probe_jobs import JobPoll, ProbeJobRunner, ProbeJobSpec
from advisor.providers.tuning import TrialResult
from perf_fixtures import with_synthetic_trace

from advisor.evaluation.candidates import Candidate
from advisor.evaluation.local import LocalBackend
from advisor.evaluation.predict_api import predict
from advisor.intervals import Interval
from advisor.options import SuggestOptions, workload_info
from advisor.prediction.run.iteration_model import epoch_sweep, normalise
from advisor.remote.cache import RemoteProbe
from advisor.tuning.import_results import job_cost

# issue #26: a probe made ready for prediction (its operator trace and loader time), so
# no trace is taken here (no torch import)
TRACE = {"data_s": 0.004}
# one machine of each service, a VM with a 60 s minimum, a spot variant, and this machine
MACHINES = (
    "ec2:g5.xlarge",
    "sagemaker:ml.g5.xlarge",
    "compute-engine:g2-standard-4",
    "vertex:g2-standard-8",
    "azure-vm:NC4as_T4_v3",
    "azure-ml:NC4as_T4_v3",
)


def _probe(batch: int = 256, step: float = 0.1) -> ProbeResult:
    return with_synthetic_trace(ProbeResult(
        workload="fcn", framework="torch", batch_size=batch, device="cpu", threads=1,
        init_s=1.0, iteration_s=(step * 5, *([step] * 7)), validation_s=(0.2, 0.1),
        validation_samples_measured=212, n_train=40_512, n_val=212, wall_s=3.0,
        fingerprint=dict(TRACE),
    ))  # fmt: skip


def _same(a: Any, b: Any) -> None:
    assert (a.value, a.low, a.high) == pytest.approx((b.value, b.low, b.high), rel=1e-12)


@pytest.mark.parametrize("spot", [False, True], ids=["on-demand", "spot"])
def test_predict_and_suggest_give_the_same_times_and_costs_for_the_same_run(spot: bool) -> None:
    catalog = load()
    machines = [catalog.get(k) for k in MACHINES]
    if not spot:
        machines.append(local_machine())
    probe = _probe()
    # advisor predict (its Python face), from that probe, untraced (the trace is the one
    # prediction path's business, not the cost rule's)
    pred = predict(
        "fcn", 256, machines=machines, catalog=catalog, probe=probe, trace=False, spot=spot
    )
    # advisor suggest's scorer, on the same probe, same catalog
    backend = LocalBackend(
        optuna.storages.InMemoryStorage(), catalog=catalog, run_probe=lambda r: probe
    )
    wl = workload_info(SuggestOptions("fcn"))
    for f in pred.rows:
        ev = backend.screen(wl, Candidate(f.machine, spot=spot), 256, {})
        assert ev is not None and ev.ok and ev.epochs == pred.epochs, f.machine.key
        assert f.job is not None
        _same(ev.runtime, f.job.runtime)
        _same(ev.cost, f.job.cost)
        # predict's row estimate is that same whole job: no training-alone price
        assert f.estimate.cost is not None
        _same(f.estimate.runtime, f.job.runtime)
        _same(f.estimate.cost, f.job.cost)


def test_the_billing_minimum_applies_to_the_whole_job_not_to_the_training() -> None:
    catalog = load()
    ec2 = catalog.get("ec2:g5.xlarge")
    pred = predict("fcn", 256, machines=[ec2], catalog=catalog, probe=_probe(step=0.001),
                   trace=False, epochs=1)  # fmt: skip
    (f,) = pred.rows
    assert f.job is not None and f.overheads is not None
    train = f.job.training.value
    assert train < 60  # a short training: alone, the 60 s minimum would price it
    billed = billing_rule("ec2").billed(f.overheads.billed.value + train)
    assert f.job.cost.value == pytest.approx(usd(billed, ec2.price()))
    assert f.estimate.cost is not None and f.estimate.cost.value == pytest.approx(f.job.cost.value)
    assert f.estimate.cost.value != pytest.approx(usd(60.0, ec2.price()))  # the old rule


def test_the_per_epoch_tables_are_whole_jobs_and_a_free_machine_is_free() -> None:
    catalog = load()
    machines = [
        catalog.get("ec2:g5.xlarge"),
        catalog.get("sagemaker:ml.g5.xlarge"),
        local_machine(),
    ]
    pred = predict("fcn", 256, machines=machines, catalog=catalog, probe=_probe(), trace=False)
    wl = workload_info(SuggestOptions("fcn"))
    cost: dict[str, dict[int, float]] = {}
    runtime: dict[str, dict[int, float]] = {}
    for f in pred.rows:  # each cell by hand: start-up + training, billed once
        over = run_overheads(f.machine, wl.data_bytes, wl.data_basis)
        for n, est in f.sweep.items():
            plain = epoch_sweep(f.prediction.phases, wl.n_train, wl.n_val, 256, [n])[n].runtime
            job = price_run(plain, f.price_per_hour, service=f.machine.service, overheads=over)
            assert est.runtime.value == pytest.approx(job.runtime.value)
            runtime.setdefault(f.machine.key, {})[n] = job.runtime.value
            cost.setdefault(f.machine.key, {})[n] = job.cost.value
    for kind, table in (("runtime", runtime), ("cost", cost)):
        expected = normalise(table)
        assert set(pred.tables[kind]) == set(expected)
        for key, row in expected.items():
            assert pred.tables[kind][key] == pytest.approx(row), (kind, key)
    # the local machine costs 0: it is "free" (0), and the others are ratios to the
    # cheapest paid machine -- never inf
    assert all(v == 0.0 for v in pred.tables["cost"]["local:local"].values())
    for row in pred.tables["cost"].values():
        assert all(math.isfinite(v) for v in row.values())
    paid = [k for k in pred.tables["cost"] if k != "local:local"]
    assert min(pred.tables["cost"][k][pred.epochs] for k in paid) == 1.0


def test_normalise_never_divides_by_a_free_machine() -> None:
    norm = normalise({"free": {5: 0.0}, "a": {5: 2.0}, "b": {5: 3.0}, "zero-col": {7: 0.0}})
    assert norm == {"free": {5: 0.0}, "a": {5: 1.0}, "b": {5: 1.5}, "zero-col": {7: 0.0}}


def test_every_service_pays_the_image_pull_a_vm_included() -> None:
    for (provider, service), terms in SERVICES.items():
        if provider in ("local", "owned"):  # machines already running here or at the user's
            assert terms == ()
            continue
        pull = [t for t in terms if t.phase == PULL]
        assert len(pull) == 1 and pull[0].billed, (provider, service)
        assert pull[0].seconds.low < pull[0].seconds.value < pull[0].seconds.high
    ec2 = load().get("ec2:g5.xlarge")
    with_image = run_overheads(ec2)
    bare = run_overheads(ec2, container=False)  # a job in the VM's own environment
    assert [t.phase for t in bare.terms] == ["VM boot"]
    assert with_image.billed.value == bare.billed.value + 60


def test_imported_trials_are_billed_by_the_service_s_rule() -> None:
    cat = load()
    price = 2.0

    def result(**kw: Any) -> TrialResult:
        return TrialResult("job-1", "completed", {}, "acc", 0.9, **kw)

    # SageMaker reports its bill: that is the cost (a read-out), whatever the run time
    sm = cat.get("sagemaker:ml.g5.xlarge")
    cost = job_cost(sm, result(runtime_s=500.0, billable_s=400.0), price)
    assert cost is not None and (cost.value, cost.low, cost.high) == (usd(400, 2.0),) * 3
    # Vertex: the trial's span includes its unbilled provisioning (prior 120 s, 60-420);
    # the rest is billed in 30 s steps (prior) -- not 600 s x price
    vx = cat.get("vertex:g2-standard-8")
    cost = job_cost(vx, result(runtime_s=600.0), price)
    assert cost is not None
    assert cost.value == pytest.approx(usd(480.0, price))  # 600 - 120, a multiple of 30
    assert cost.low == pytest.approx(usd(180.0, price))  # 600 - 420
    assert cost.high == pytest.approx(usd(540.0, price))  # 600 - 60
    assert cost.value != pytest.approx(usd(600.0, price))  # the old rule: run time x price
    # Azure ML: the MLflow run is the script only; the billed pull (prior 90 s) is added, and
    # the per-minute rule applied once: 600 + 90 = 690 -> 720 s
    az = cat.get("azure-ml:NC4as_T4_v3")
    cost = job_cost(az, result(runtime_s=600.0), price)
    assert cost is not None and cost.value == pytest.approx(usd(720.0, price))
    seconds, how = bill_measured_job("azure", "azure-ml", 600.0)
    assert seconds.value == 720.0 and "MLflow run" in how


def test_a_remote_probe_job_s_measured_start_up_is_kept_and_priced() -> None:
    cat = load()
    sm = cat.get("sagemaker:ml.g5.xlarge")
    probe = _probe()
    remote_result = dataclasses.replace(_probe(step=0.02), wall_s=20.0)
    job = {"job_id": "advisor-probe-1", "service": "sagemaker", "state": "completed",
           "wall_s": 150.0, "billed_s": 50.0, "before_start_s": 100.0, "on_machine_s": 50.0}  # fmt: skip

    def lookup(workload: Any, inst: Any, batch: int, hps: Any) -> Any:
        return (
            RemoteProbe(inst.key, remote_result, job, cached=True) if inst.key == sm.key else None
        )

    backend = LocalBackend(
        optuna.storages.InMemoryStorage(),
        catalog=cat,
        run_probe=lambda r: probe,
        remote_lookup=lookup,
    )
    wl = workload_info(SuggestOptions("fcn"))
    ev = backend.screen(wl, Candidate(sm), 256, {})
    assert ev is not None and ev.ok
    over = ev.estimate["overheads"]
    measured = [t for t in over["terms"] if t["status"] == MEASURED]
    assert [t["seconds"]["value"] for t in measured] == [100.0, 30.0]  # 50 s on it - 20 s probe
    assert [t["billed"] for t in measured] == [False, True]  # provisioning unbilled, as the prior
    download = next(t for t in over["terms"] if t["phase"] == "data download")
    assert over["startup_s"]["value"] == pytest.approx(130.0 + download["seconds"]["value"])
    billed = 30.0 + download["seconds"]["value"] + over["training_s"]["value"]
    assert ev.cost.value == pytest.approx(usd(billed, sm.price()))
    # a VM row probed through its managed twin keeps its own priors (another start-up)
    ec2 = cat.get("ec2:g5.xlarge")
    vm = backend.screen(wl, Candidate(ec2), 256, {})
    assert vm is not None and all(
        t["status"] != MEASURED for t in vm.estimate["overheads"]["terms"]
    )


class _Runner(ProbeJobRunner):
    """A job accepted at t=0 that starts on its machine at 95 s and ends at 155 s."""

    name = "sagemaker"
    providers = ("aws",)

    def check(self) -> None:
        return None

    def _submit(self, spec: ProbeJobSpec) -> str:
        return spec.job_name

    def _poll(self, job_id: str) -> JobPoll:
        return JobPoll("completed", created_at=0.0, started_at=95.0, ended_at=155.0,
                       billed_s=60.0, billed_source="BillableTimeInSeconds")  # fmt: skip

    def _fetch(self, job_id: str, spec: ProbeJobSpec) -> str | None:
        return "{}"

    def _stop(self, job_id: str) -> None:
        return None


def test_a_probe_job_outcome_keeps_its_measured_start_up() -> None:
    spec = ProbeJobSpec("job", load().get("sagemaker:ml.g5.xlarge"), "img", ("x",), 300)
    out = _Runner(clock=lambda: 0.0).run(spec)
    assert out.before_start_s == 95.0 and out.on_machine_s == 60.0
    assert out.to_dict()["before_start_s"] == 95.0 and out.wall_s == 155.0
    assert overheads_for("aws", "sagemaker").terms[0].status != MEASURED  # priors untouched


def test_overheads_are_the_one_interval_type() -> None:
    with pytest.raises(ValueError):
        Interval(10, 20, 30)
    with pytest.raises(ValueError, match=">= 0"):
        Overhead("boot", Interval(-1, -2, 3), True, "prior", "test")
    over = run_overheads(load().get("ec2:g5.xlarge"))
    assert isinstance(over.wall, Interval) and isinstance(
        over.billed_run(Interval.exact(1)), Interval
    )
