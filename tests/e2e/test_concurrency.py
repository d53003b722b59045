"""Several `advisor suggest` processes on one SQLite study: they share the work (no
configuration evaluated twice, each probe charged once) and start safely on a new file."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import optuna
import pytest

from advisor.records import TrialRecord
from advisor.study.claims import CLAIM_PREFIX

from .conftest import save_table, start, suggest_cmd


@pytest.mark.slow
def test_four_processes_share_one_study(space_file: Path, tmp_path: Path) -> None:
    # 1 s per evaluation: the work outlasts the processes' staggered start-up, so they overlap
    slow_table = save_table(tmp_path / "table.json", 1.0)
    db = tmp_path / "shared.db"  # a new file: the four also create it together
    procs = [start(suggest_cmd(slow_table, space_file, db)) for _ in range(4)]
    results = [p.communicate(timeout=300) for p in procs]
    for p, (out, err) in zip(procs, results, strict=True):
        assert p.returncode == 0, err
        assert "Traceback" not in err
        json.loads(out)
    reports = [json.loads(out) for out, _ in results]
    assert len({r["study"] for r in reports}) == 1
    storage = f"sqlite:///{db}"
    study = optuna.load_study(study_name=reports[0]["study"], storage=storage)
    records = [(t, TrialRecord.from_trial(t)) for t in study.trials]
    evaluated = Counter((r.machine, r.batch_size) for _, r in records if r is not None)
    assert evaluated and max(evaluated.values()) == 1, evaluated  # no config twice
    # each probe (machine, batch; on demand and spot share it) is charged once
    charged = Counter(
        (r.machine.removesuffix(":spot"), r.batch_size)
        for _, r in records
        if r is not None and r.probe_charged_usd > 0
    )
    assert max(charged.values()) == 1, charged
    assert sum(r["trials"]["new"] for r in reports) == len(evaluated)
    assert all(t.state.is_finished() for t in study.trials)
    rdb = optuna.storages.RDBStorage(storage)
    attrs = rdb.get_study_system_attrs(rdb.get_study_id_from_name(study.study_name))
    claims = {k: v for k, v in attrs.items() if k.startswith(CLAIM_PREFIX)}
    assert claims  # they were used
    # a claim left is that of a config whose trial is written (which overrides it)
    live = {k.removeprefix(CLAIM_PREFIX) for k, v in claims.items() if v is not None}
    assert live <= {f"{m}|{b}" for m, b in evaluated}, live - {f"{m}|{b}" for m, b in evaluated}
    peers = {k: v for k, v in attrs.items() if k.startswith("peer:")}
    assert len(peers) == 4 and all(v["ended"] for v in peers.values())
    # the work was shared: more than one process evaluated something
    assert sum(r["trials"]["new"] > 0 for r in reports) >= 2
    # and the same command once more adds nothing and gives the study's answer
    again = subprocess.run(
        suggest_cmd(slow_table, space_file, db), capture_output=True, text=True, timeout=120
    )
    assert again.returncode == 0, again.stderr
    last = json.loads(again.stdout)
    assert last["resumed"] and last["trials"]["new"] == 0
    assert last["trials"]["total"] == len(study.trials)


@pytest.mark.slow
def test_twelve_processes_create_one_new_storage_together(tmp_path: Path) -> None:
    db = tmp_path / "new.db"
    code = (
        "import sys, optuna\n"
        "from advisor.storage.urls import open_storage\n"
        "from advisor.evaluation.local import ProbeCache\n"
        "s = open_storage(sys.argv[1])\n"
        "ProbeCache(s)\n"
        "optuna.create_study(study_name='s', storage=s, load_if_exists=True)\n"
        "print('ok')\n"
    )
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code, f"sqlite:///{db}"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(12)
    ]
    outs = [p.communicate(timeout=300) for p in procs]
    failed = [err for p, (_, err) in zip(procs, outs, strict=True) if p.returncode != 0]
    assert not failed, failed[0]
    assert [o.strip() for o, _ in outs] == ["ok"] * 12
    assert {s.study_name for s in optuna.get_all_study_summaries(f"sqlite:///{db}")} == {
        "s",
        "advisor-probe-cache",
    }


PROBE_ONCE = """
import sys, time
from advisor.evaluation.local import LocalBackend
from advisor.probes.result import ProbeResult
from advisor.evaluation.workload import WorkloadInfo

log = sys.argv[2]

def run_probe(req):
    with open(log, "a") as f:
        f.write(f"{req.batch_size}\\n")
    time.sleep(1.0)  # a probe takes a while: the other process arrives meanwhile
    return ProbeResult(req.workload, req.framework, req.batch_size, "cpu", req.threads,
                       init_s=0.5, iteration_s=(0.3, 0.1, 0.1), validation_s=(0.2, 0.2))

backend = LocalBackend(sys.argv[1], run_probe=run_probe, threads=2, catalog=object())
probe, new = backend.probe(WorkloadInfo("fcn", n_train=1000, n_val=100), 256, {})
print(probe.iteration_s, new)
"""


@pytest.mark.slow
def test_two_processes_on_a_cold_home_run_each_probe_once(tmp_path: Path) -> None:
    log = tmp_path / "probes.log"
    url = f"sqlite:///{tmp_path / 's.db'}"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", PROBE_ONCE, url, str(log)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    outs = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), [e for _, e in outs]
    assert log.read_text().split() == ["256"]  # run by one, read from the cache by the other
    results = sorted(o.strip() for o, _ in outs)
    assert results == ["(0.3, 0.1, 0.1) False", "(0.3, 0.1, 0.1) True"]
