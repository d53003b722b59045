"""The provider contract: one suite, run for SageMaker, Vertex AI and Azure ML.

Every back end builds a request its SDK accepts by its own rules, refuses what its service
cannot do with the fix, and goes through the full round trip against its fake wire: submit ->
status -> import -> import again (idempotent), with completed, failed, stopped and running jobs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import wires  # tests/helpers, on pytest's pythonpath
from advisor.providers import backends, registry
from advisor.search_spaces.space import CategoricalParam, FloatParam, IntParam

from advisor.errors import AdvisorError

pytestmark = pytest.mark.slow  # imports each cloud SDK

PARAMS = (FloatParam("momentum", 0.5, 0.99), IntParam("layers", 1, 4),
          CategoricalParam("optimizer", ("sgd", "adam")))  # fmt: skip
ROUND_TRIP_PARAMS = (FloatParam("lr", 0.01, 0.3), CategoricalParam("optimizer", ("sgd", "adam")))
TRIALS = [  # the last value is the measured step time each reports (step_s)
    wires.Outcome("completed", 0.05, "sgd", 0.91, 300.0, 0.004),
    wires.Outcome("failed", 0.2, "adam", None, 30.0, 0.003),
    wires.Outcome("stopped", 0.25, "adam", 0.42, 120.0, 0.006),  # stopped early by the service
    wires.Outcome("running", 0.1, "sgd", None, 0.0),
]


@pytest.fixture(scope="module")
def fcn_probe() -> Any:
    """A real local probe of fcn at the round trip's batch size (1024)."""
    from advisor.probes.result import ProbeRequest
    from advisor.probes.runner import run_probe

    probe = run_probe(ProbeRequest(workload="fcn", batch_size=1024, iterations=4, threads=1,
                                   gradient_noise=False))  # fmt: skip
    assert probe.ok, probe.error
    return probe


def _cache_probe(storage: str, probe: Any) -> None:
    """Put ``probe`` in the study storage's probe cache, as ``advisor suggest`` leaves it."""
    from advisor.evaluation.local import ProbeCache, probe_cache_key
    from advisor.evaluation.workload import WorkloadInfo

    key = probe_cache_key(WorkloadInfo(name="fcn", framework="torch", n_train=1),
                          probe.batch_size, probe.threads, len(probe.iteration_s), {})  # fmt: skip
    ProbeCache(storage).put(key, probe)


@pytest.fixture(params=registry.backend_names())
def wire(request: pytest.FixtureRequest) -> Any:
    return wires.WIRES[request.param]()


class TestProviderContract:
    def spec(self, wire: Any, make_spec: Any, **overrides: Any) -> Any:
        fields = {"instance_type": wire.machine, "hyperparameters": PARAMS, "output": None,
                  "accelerator": "A10G" if wire.name == "sagemaker" else "L4",
                  "accelerator_count": 1, "max_trials": 7, "parallel_trials": 2}  # fmt: skip
        if wire.name == "azureml":
            fields["accelerator"] = "A10"
        fields.update(overrides)
        return make_spec(**fields)

    def test_request_is_accepted_by_the_sdks_own_rules(self, wire: Any, make_spec: Any) -> None:
        backend = backends.get_backend(wire.name, **wire.options)
        request = backend.build_request(self.spec(wire, make_spec))
        wire.validate(request)

    def test_spot_runs_on_spot_capacity_and_resumes_from_checkpoints(
        self, wire: Any, make_spec: Any
    ) -> None:
        backend = backends.get_backend(wire.name, **wire.options)
        output = {"sagemaker": "s3://bucket/advisor", "vertex": "gs://bucket/advisor"}
        spec = self.spec(wire, make_spec, spot=True, output=output.get(wire.name))
        request = backend.build_request(spec)
        wire.validate(request)
        wire.check_spot(request)

    def test_trials_train_on_the_machines_gpu(self, wire: Any, make_spec: Any) -> None:
        backend = backends.get_backend(wire.name, **wire.options)
        text = json.dumps(backend.build_request(self.spec(wire, make_spec)))
        # SageMaker: a static hyperparameter; Vertex: container args; Azure: the command.
        device = {"sagemaker": '"device": "cuda"', "vertex": '"--device", "cuda"',
                  "azureml": "--device cuda"}[wire.name]  # fmt: skip
        assert device in text

    def test_what_the_service_cannot_do_is_refused_with_the_fix(
        self, wire: Any, make_spec: Any
    ) -> None:
        backend = backends.get_backend(wire.name, **wire.options)
        for overrides, message in wire.refusals:
            spec = self.spec(wire, make_spec, **overrides)
            with pytest.raises(AdvisorError, match=message) as info:
                backend.build_request(spec)
            assert "To fix:" in str(info.value), (wire.name, overrides)

    def test_only_its_own_cloud_machines_map(self, wire: Any) -> None:
        cls = backends.backend_class(wire.name)
        foreign = {"sagemaker": "vertex:n1-standard-8", "vertex": "azure-ml:Standard_NC6",
                   "azureml": "ec2:p3.2xlarge"}[wire.name]  # fmt: skip
        with pytest.raises(AdvisorError, match="is not one of"):
            cls.machine_type(foreign, None)

    def test_round_trip_submit_status_import_and_import_again(
        self,
        wire: Any,
        make_spec: Any,
        storage: str,
        study_factory: Any,
        tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch,
        fcn_probe: Any,
    ) -> None:
        import optuna

        from advisor.records import TrialRecord
        from advisor.tuning.jobs import import_job, job_status, submit_job

        study = study_factory(storage, params=ROUND_TRIP_PARAMS)
        _cache_probe(storage, fcn_probe)
        before = _recommended(study).number
        spec = self.spec(wire, make_spec, hyperparameters=ROUND_TRIP_PARAMS,
                         output="s3://bucket/advisor" if wire.name == "sagemaker" else None,
                         strategy="random", image=wire.image,
                         fixed={"model": "fcn", "batch_size": 1024, "epochs": 20})  # fmt: skip
        with wire.connected(tmp_path, monkeypatch) as backend:
            sub = submit_job(spec, backend)
            assert sub.provider == wire.name and sub.job_id
            assert wire.identity and all(part in sub.identity for part in wire.identity), (
                sub.identity
            )
            wire.run_trials(backend, sub, TRIALS)
            status = job_status(sub.job_id, backend)
            assert status["provider"] == wire.name
            assert status["state"]
            if wire.counts_trials:  # moto answers SageMaker's counters with canned values
                assert sum(status["trials"].values()) == len(TRIALS)
            results = {r.hyperparameters.get("optimizer"): r for r in backend.results(sub.job_id)}
            first = import_job(sub.job_id, backend, study)
            again = import_job(sub.job_id, backend, study)
        assert first.trials_seen == len(TRIALS)  # the other tuning job's trial is not seen
        assert len(first.trials_added) == 3  # the running job is not imported yet
        assert again.trials_added == []  # idempotent
        assert results  # the service's values came back

        study = optuna.load_study(study_name=study.study_name, storage=storage)
        managed = [t for t in study.trials if t.user_attrs.get("source") == "managed"]
        states = sorted(t.state.name for t in managed)
        assert states == ["COMPLETE", "FAIL", "PRUNED"]
        done = next(t for t in managed if t.state.name == "COMPLETE")
        assert done.params["lr"] == pytest.approx(0.05) and done.params["optimizer"] == "sgd"
        assert done.values[0] == pytest.approx(300.0, rel=0.01)
        record = TrialRecord.from_trial(done)
        managed_run = record.managed if record is not None else None
        attrs = done.user_attrs
        assert attrs["provider"] == wire.name and attrs["tuning_job"] == sub.job_id
        assert attrs["managed_metric"] == {"name": "val_accuracy", "value": pytest.approx(0.91)}
        assert attrs["instance_type"] == wire.machine
        assert attrs["epochs"] == 20  # what the job ran, not the recommendation's 14
        if "batch_size" in done.params:
            assert done.params["batch_size"] == 1024
        from advisor.providers.catalog import load

        # Priced at the on-demand rate of the machine that ran, on this service.
        assert attrs["price_per_hour"] == load().get(wire.catalog_key).on_demand_usd_per_h
        if managed_run is not None:
            assert managed_run.provider == wire.name
        stopped = next(t for t in managed if t.state.name == "PRUNED")
        assert stopped.user_attrs["managed_metric"]["value"] == pytest.approx(0.42)
        # Imported trials never become the recommendation by themselves.
        assert _recommended(study).number == before
        _check_ledger(wire, storage, fcn_probe, first, again)


def _check_ledger(wire: Any, storage: str, probe: Any, first: Any, again: Any) -> None:
    """The measured step times of the imported trials are in the ledger (issue #14 s. 4)
    and correct the next prediction for that device class, with the evidence."""
    import math

    from advisor.providers.catalog import load

    from advisor.prediction.timing.ledger import records
    from advisor.prediction.timing.model import predict

    catalog = load()
    row = catalog.get(wire.catalog_key)
    uncorrected = predict(probe, row, catalog, 1024, calibrate=False)
    corrected = predict(probe, row, catalog, 1024, ledger_storage=storage)
    found = records(storage)
    assert again.calibrated == 0 and not again.not_calibrated  # nothing recorded twice
    if not wire.reports_step_s:  # Vertex: no step time comes back, nothing is recorded
        assert first.calibrated == 0 and first.not_calibrated == {"no measured step time": 3}
        assert found == [] and corrected.calibration_points == 0
        return
    # The completed and the stopped trial; the failed one is counted, not recorded.
    assert first.calibrated == 2 and first.not_calibrated == {"failed": 1}
    assert sorted(r.measured_t2 for r in found) == [0.004, 0.006]
    assert {(r.origin, r.machine, r.batch_size, r.workload) for r in found} == {
        ("tuning-trial", wire.catalog_key, 1024, "fcn")
    }
    assert all(r.predicted_t2 == pytest.approx(uncorrected.phases.t2.value) for r in found)
    factor = math.exp(sum(math.log(r.ratio) for r in found) / 2)
    assert corrected.calibration_points == 2
    assert corrected.calibration == pytest.approx(factor)
    assert corrected.phases.t2.value == pytest.approx(uncorrected.phases.t2.value * factor)
    assert "2 measured run(s)" in corrected.calibration_evidence
    assert "tuning-trial" in corrected.calibration_evidence


def _recommended(study: Any) -> Any:
    from advisor.study.selection import recommended_trial

    return recommended_trial(study)
