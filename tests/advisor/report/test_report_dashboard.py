"""`advisor dashboard` as a user sees it: the study's API response (size, summary attributes,
probe cache hidden) and the page in a real headless Chromium (DevTools protocol)."""

from __future__ import annotations

import base64
import gzip
import html
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import optuna
import pytest
from advisor.probes.result import ProbeResult
from advisor.providers.catalog import load
from advisor.providers.pricing import price_run
from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

from advisor.cli.main import main
from advisor.evaluation.candidates import Candidate
from advisor.evaluation.local import PROBE_CACHE_STUDY
from advisor.prediction.run.iteration_model import estimate, phase_times
from advisor.records import TrialRecord
from advisor.report.dashboard import DashboardView, detail_page, view_trial

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
# Where the browser test keeps its screenshots (CI may collect them from here).
ARTEFACTS = Path(
    os.environ.get("ADVISOR_TEST_ARTEFACTS", Path(tempfile.gettempdir()) / "advisor-test-artefacts")
)


def _probe(batch: int) -> ProbeResult:
    """A probe shaped like a real CPU probe of fcn (8 iterations, fingerprint)."""
    return ProbeResult(
        workload="fcn", framework="torch", batch_size=batch, device="cpu", threads=2,
        init_s=2.5, iteration_s=(0.9, *(0.21 + 0.003 * i for i in range(7))),
        validation_s=(1.2, 1.0), validation_samples_measured=2048, validation_scale=4.9,
        n_train=60000, n_val=10000, flops_per_iteration=3.1e9 * batch / 256,
        parameters=1_863_690, wall_s=6.8,
        fingerprint={
            "framework": "torch", "torch": "2.13.0+cpu", "python": "3.11.2", "machine": "x86_64",
            "cpu_model": "Intel(R) Xeon(R) CPU @ 2.20GHz",
            "device_name": "Intel(R) Xeon(R) CPU @ 2.20GHz", "cpu_count": 2, "threads": 2,
            "allocator": "glibc malloc (MALLOC_ARENA_MAX unset)", "cuda": None, "gpus": 0,
        },
        samples_per_s=1190.5, cpu_utilisation=0.93, peak_host_memory_bytes=1_482_000_000,
        warnings=("max pooling on channels-first CPU tensors gets faster as it trains",),
    )  # fmt: skip


def build_study(url: str, n: int = 100) -> optuna.Study:
    """An advisor study of ``n`` trials over every catalog machine (on demand and spot), with
    the attributes a real run writes; plus the probe cache study."""
    cands = [Candidate(i) for i in load().instances]
    cands += [Candidate(i, spot=True) for i in load().instances if i.spot_usd_per_h is not None]
    dists = {
        "machine": CategoricalDistribution(tuple(c.key for c in cands)),
        "batch_size": CategoricalDistribution((256, 512, 1024)),
        "lr": FloatDistribution(0.01, 0.3, log=True),
        "momentum": FloatDistribution(0.5, 0.99),
        "dropout": FloatDistribution(0.0, 0.5),
        "layers": IntDistribution(1, 4),
    }
    study = optuna.create_study(study_name="advisor-fcn-torch-time-test", storage=url)
    optuna.create_study(study_name=PROBE_CACHE_STUDY, storage=url).set_user_attr("k", "v")
    for i in range(n):
        cand = cands[(i * 7) % len(cands)]
        batch = (256, 512, 1024)[i % 3]
        probe = _probe(batch)
        phases = phase_times(probe, 60000, 10000)
        est = estimate(phases, 60000, 10000, 10, batch)
        p = price_run(
            est.runtime, cand.price_per_hour, spot=cand.spot, service=cand.instance.service
        )
        rec = TrialRecord(
            machine=cand.key, batch_size=batch, source="modelled",
            price_per_hour=cand.price_per_hour, spot=cand.spot, epochs=10,
            runtime=p.runtime, cost=p.cost,
            instance=dict(cand.instance.to_dict(), catalog_snapshot="2026-11"),
            probe_seconds=7.0, estimate=est.to_dict(), phases=phases, probe=probe.to_dict(),
            feasible=True,
        )  # fmt: skip
        study.add_trial(
            optuna.trial.create_trial(
                params={
                    "machine": cand.key,
                    "batch_size": batch,
                    "lr": 0.05,
                    "momentum": 0.9,
                    "dropout": 0.1,
                    "layers": 2,
                },
                distributions=dists,
                value=rec.runtime.value,
                user_attrs=rec.to_attrs(),
            )
        )
    return study


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[str, optuna.Study]]:
    """`advisor dashboard` on a 100-trial study, as a subprocess; yields its base URL."""
    url = f"sqlite:///{tmp_path / 'd.db'}"
    study = build_study(url)
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "advisor.cli.main", "dashboard", "--storage", url, "--port", str(port)],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(120):
            try:
                urllib.request.urlopen(f"{base}/api/studies", timeout=2).read()
                break
            except OSError:
                time.sleep(0.25)
        yield base, study
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def _get(url: str) -> tuple[int, Any]:
    with urllib.request.urlopen(url, timeout=30) as r:
        body = r.read()
    return len(body), json.loads(body)


def test_view_trial_is_short_and_sortable(tmp_path: Path) -> None:
    study = build_study(f"sqlite:///{tmp_path / 'v.db'}", n=3)
    raw = study.get_trials()[0]
    shown = view_trial(raw)
    assert shown.params == raw.params and shown.values == raw.values
    assert shown.distributions["machine"].choices == (raw.params["machine"],)
    attrs = shown.user_attrs
    assert isinstance(attrs["runtime_s"], float) and isinstance(attrs["cost_usd"], float)
    # issue #27: p2.xlarge's price is an estimate, dated no newer than the read-outs
    assert attrs["how"] == "modelled" and attrs["price"].endswith("/h 2025-12")
    assert attrs["detail"] == f"/advisor/trials/{raw._trial_id}" and "probe" not in attrs
    assert all(len(str(v)) < 40 for v in attrs.values())
    view = DashboardView(optuna.storages.RDBStorage(f"sqlite:///{tmp_path / 'v.db'}"))
    assert [s.study_name for s in view.get_all_studies()] == [study.study_name]
    page = detail_page(view.base.get_trial(raw._trial_id))
    assert "| run time (s) |" in page and "Probe: ok on cpu" in page and "max pooling" in page
    # Every stored attribute whole (the dashboard cuts attributes at 1,024 characters).
    for key, value in raw.user_attrs.items():
        if key != "estimate":
            assert html.escape(json.dumps(value, indent=2, default=str)) in page
    # The estimate (made before pricing) shows the trial's priced cost, not null.
    assert raw.user_attrs["estimate"]["cost_usd"] is None
    priced = dict(
        raw.user_attrs["estimate"], cost_usd=raw.user_attrs["cost_usd"], priced_by="pricing"
    )
    assert html.escape(json.dumps(priced, indent=2)) in page


@pytest.mark.slow
def test_dashboard_api_is_small_and_hides_the_probe_cache(
    served: tuple[str, optuna.Study],
) -> None:
    base, study = served
    _, studies = _get(f"{base}/api/studies")
    assert [s["study_name"] for s in studies["study_summaries"]] == [study.study_name]
    size, detail = _get(f"{base}/api/studies/{study._study_id}")
    assert len(detail["trials"]) == 100
    # Each trial carries its own machine, not the list of every candidate (here 400+).
    assert all(len(t["params"][0]["distribution"]["choices"]) == 1 for t in detail["trials"])
    assert size < 300_000, f"study API response is {size} bytes for 100 trials"
    req = urllib.request.Request(
        f"{base}/api/studies/{study._study_id}", headers={"Accept-Encoding": "gzip"}
    )
    with urllib.request.urlopen(req, timeout=30) as r:
        sent = r.read()
        assert r.headers["Content-Encoding"] == "gzip"
    assert len(sent) < 200_000, f"{len(sent)} bytes sent for 100 trials"
    assert json.loads(gzip.decompress(sent))["trials"] == detail["trials"]
    attrs = {a["key"]: a["value"] for a in detail["trials"][0]["user_attrs"]}
    assert {"gpus", "capacity", "runtime_s", "runtime_interval", "cost_usd", "cost_interval",
            "how", "price", "detail"} <= set(attrs)  # fmt: skip
    with urllib.request.urlopen(base + attrs["detail"], timeout=30) as r:
        assert "Probe: ok on cpu" in r.read().decode()


def _cdp_page(port: int) -> str:
    for _ in range(100):
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=2) as r:
                pages = [p for p in json.loads(r.read()) if p["type"] == "page"]
            if pages:
                return str(pages[0]["webSocketDebuggerUrl"])
        except OSError:
            pass
        time.sleep(0.2)
    raise AssertionError("chromium did not open its DevTools endpoint")


class _Cdp:
    """A minimal DevTools protocol client (one page, calls in order)."""

    def __init__(self, ws_url: str) -> None:
        from websockets.sync.client import connect

        self.ws = connect(ws_url, max_size=64 * 2**20)
        self.n = 0

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        self.n += 1
        self.ws.send(json.dumps({"id": self.n, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv(timeout=60))
            if msg.get("id") == self.n:
                assert "error" not in msg, msg
                return dict(msg.get("result", {}))

    def text(self) -> str:
        res = self.call(
            "Runtime.evaluate", expression="document.body.innerText", returnByValue=True
        )
        return str(res["result"].get("value", ""))


def _screenshot(cdp: _Cdp, path: Path) -> None:
    shot = cdp.call("Page.captureScreenshot", format="png")
    path.write_bytes(base64.b64decode(shot["data"]))
    assert path.read_bytes()[:4] == b"\x89PNG"


@pytest.mark.slow
@pytest.mark.skipif(
    CHROMIUM is None, reason="needs Debian's chromium package (apt-get install chromium)"
)
def test_dashboard_in_a_real_browser(served: tuple[str, optuna.Study], tmp_path: Path) -> None:
    base, study = served
    port = _free_port()
    assert CHROMIUM is not None
    browser = subprocess.Popen(
        [
            CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
            "--no-first-run", "--disable-background-networking", "--disable-component-update",
            "--disable-sync", f"--user-data-dir={tmp_path / 'chrome'}",
            f"--remote-debugging-port={port}", "--window-size=1400,1000", "about:blank",
        ],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        cdp = _Cdp(_cdp_page(port))
        cdp.call("Page.enable")
        trial = study.get_trials()[0]
        cdp.call("Page.navigate", url=f"{base}/dashboard/studies/{study._study_id}/trials")
        text = ""
        for _ in range(120):  # the page renders with React after loading the study
            text = cdp.text()
            if "runtime_interval" in text and trial.user_attrs["instance"]["instance_type"] in text:
                break
            time.sleep(0.25)
        assert "runtime_interval" in text and "cost_interval" in text, text[:2000]
        assert trial.user_attrs["instance"]["instance_type"] in text
        width = cdp.call("Runtime.evaluate", expression="document.documentElement.scrollWidth",
                         returnByValue=True)["result"]["value"]  # fmt: skip
        assert width <= 2000, f"page is {width} px wide"
        ARTEFACTS.mkdir(parents=True, exist_ok=True)
        _screenshot(cdp, ARTEFACTS / "dashboard-trial.png")
        cdp.ws.close()
    finally:
        browser.terminate()
        browser.wait(timeout=10)


def test_dashboard_on_a_port_in_use_is_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    url = f"sqlite:///{tmp_path / 'p.db'}"
    optuna.create_study(study_name="advisor-x", storage=url)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        with pytest.raises(SystemExit) as info:
            main(["dashboard", "--storage", url, "--port", str(port)])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert f"Cannot serve on 127.0.0.1:{port}" in err and "--port" in err
    assert "Traceback" not in err


def test_dashboard_on_postgres_without_driver_is_one_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    pytest.importorskip("optuna_dashboard")
    try:
        import psycopg  # noqa: F401

        pytest.skip("psycopg is installed here, so the driver is not missing")
    except ImportError:
        pass
    with pytest.raises(SystemExit) as info:
        main(["dashboard", "--storage", "postgresql://user@127.0.0.1:1/advisor", "--port", "0"])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "which is not installed" in err and "advisor[postgres]" in err
    assert "Traceback" not in err


def _with_short_runs(url: str) -> optuna.Study:
    """A 20-trial study plus short runs of `suggest --tune` (issue #29), as a real run leaves it."""
    from advisor.search_spaces.space import FloatParam
    from short_runs import add_short_runs

    study = build_study(url, n=20)
    params = [FloatParam("lr", 0.01, 0.3, log=True), FloatParam("momentum", 0.5, 0.99),
              FloatParam("dropout", 0.0, 0.5)]  # fmt: skip
    add_short_runs(study, params, batch=512, budget_s=120.0)
    return study


def test_short_runs_are_learning_curves_without_an_objective_value(tmp_path: Path) -> None:
    study = _with_short_runs(f"sqlite:///{tmp_path / 'd.db'}")
    view = DashboardView(study._storage)
    trials = view.get_all_trials(study._study_id)
    runs = [t for t in trials if t.user_attrs.get("kind") == "short run (--tune)"]
    assert runs and all(t.intermediate_values for t in runs)
    finished = [t for t in runs if t.state == optuna.trial.TrialState.COMPLETE]
    pruned = [t for t in runs if t.state == optuna.trial.TrialState.PRUNED]
    assert finished and all(t.values is None for t in finished)
    assert pruned and all(t.values for t in pruned)  # the dashboard draws their curves
    assert {t.user_attrs["ended"] for t in runs} >= {"pruned", "finished"}
    assert any(t.state == optuna.trial.TrialState.PRUNED for t in runs)
    best = view.get_best_trial(study._study_id)
    assert "kind" not in best.user_attrs and best.values is not None  # a machine trial


@pytest.mark.slow
@pytest.mark.skipif(
    CHROMIUM is None, reason="needs Debian's chromium package (apt-get install chromium)"
)
def test_short_runs_in_a_real_browser(tmp_path: Path) -> None:
    """The study page draws the short runs' learning curves (optuna-dashboard's intermediate
    values plot) and lists them pruned or complete."""
    url = f"sqlite:///{tmp_path / 'd.db'}"
    study = _with_short_runs(url)
    port, cdp_port = _free_port(), _free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "advisor.cli.main", "dashboard", "--storage", url, "--port", str(port)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    browser = None
    try:
        base = f"http://127.0.0.1:{port}"
        for _ in range(120):
            try:
                urllib.request.urlopen(f"{base}/api/studies", timeout=2).read()
                break
            except OSError:
                time.sleep(0.25)
        assert CHROMIUM is not None
        browser = subprocess.Popen(
            [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
             f"--user-data-dir={tmp_path / 'chrome'}", f"--remote-debugging-port={cdp_port}",
             "--window-size=1400,1800", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        cdp = _Cdp(_cdp_page(cdp_port))
        cdp.call("Page.enable")
        cdp.call("Page.navigate", url=f"{base}/dashboard/studies/{study._study_id}")
        text = ""
        for _ in range(160):
            text = cdp.text()
            if "Intermediate" in text and "PRUNED" in text.upper():
                break
            time.sleep(0.25)
        assert "Intermediate" in text, text[:2000]
        ARTEFACTS.mkdir(parents=True, exist_ok=True)
        _screenshot(cdp, ARTEFACTS / "dashboard-short-runs.png")
        assert "Failed to load" not in cdp.text()  # e.g. the importance: no value is None
        pruned = next(t.number for t in study.trials if t.state == optuna.trial.TrialState.PRUNED)
        trials_page = f"{base}/dashboard/studies/{study._study_id}/trials?numbers={pruned}"
        cdp.call("Page.navigate", url=trials_page)
        for _ in range(160):
            text = cdp.text()
            if "short run (--tune)" in text:
                break
            time.sleep(0.25)
        assert "short run (--tune)" in text and "pruned" in text, text[:2000]
        _screenshot(cdp, ARTEFACTS / "dashboard-short-run-trial.png")
        cdp.ws.close()
    finally:
        if browser is not None:
            browser.terminate()
            browser.wait(timeout=10)
        server.terminate()
        server.wait(timeout=10)
