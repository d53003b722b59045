"""One case of ``gpu_check.py``: which catalog row this machine is, the probes, the
prediction and the short real training (run in a fresh process: ``python
benchmarks/gpu_check_case.py`` reads its spec as JSON on stdin)."""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import subprocess
import sys
import time
from typing import Any

PHASES = (
    ("init", "init"),
    ("t1", "first iteration"),
    ("t2", "steady iteration"),
    ("v1", "validation, 1st pass"),
    ("v2", "validation, later pass"),
)
GPUS_USED = 1  # the probe and the training run on cuda:0


class CheckError(Exception):
    """Bad input or environment: one line, exit 2."""


# --- which catalog row this machine is ---------------------------------------------------------


def _tokens(text: str) -> set[str]:
    return {t for t in text.lower().replace("-", " ").replace("_", " ").split() if t}


def accelerator_for(device_name: str, names: list[str]) -> str | None:
    """The catalog accelerator a CUDA device name is: every part of the catalog name is a word
    of the device name (``A100-80GB`` in "NVIDIA A100-SXM4-80GB"); the most specific wins."""
    words = _tokens(device_name)
    hits = [n for n in names if _tokens(n) and _tokens(n) <= words]
    return max(hits, key=lambda n: (len(_tokens(n)), len(n)), default=None)


def one_gpu(row: Any) -> Any:
    """``row`` as the one GPU the check uses: a machine of n GPUs becomes its 1/n share."""
    n = row.accelerator_count
    if n <= GPUS_USED:
        return row
    return dataclasses.replace(
        row,
        instance_type=f"{row.instance_type}/{n}",
        vcpus=max(1, row.vcpus // n),
        memory_gib=row.memory_gib / n,
        accelerator_count=GPUS_USED,
        accelerator_memory_gib=row.accelerator_memory_gib / n,
        on_demand_usd_per_h=row.on_demand_usd_per_h / n,
        spot_usd_per_h=None if row.spot_usd_per_h is None else row.spot_usd_per_h / n,
    )


def choose_machine(
    catalog: Any, device: str, device_name: str, override: str | None
) -> tuple[Any, str]:
    """The catalog row to predict for, and why it was chosen (one line)."""
    from advisor.evaluation.predict_api import resolve_machines

    if override:
        _, (row,) = resolve_machines(override, catalog.snapshot)
        why = f"--machine {override}"
    elif device == "cpu":
        _, (row,) = resolve_machines("local", catalog.snapshot)
        why = "--device cpu: this machine ('local'), predicted from its own CPU probe"
    else:
        acc = accelerator_for(device_name, list(catalog.accelerators))
        rows = [r for r in catalog.instances if acc is not None and r.accelerator == acc]
        if not rows:
            raise CheckError(
                f"no catalog machine has the GPU '{device_name}' (accelerator {acc or 'unknown'})"
                "; pass --machine KEY (e.g. ec2:p5.4xlarge)"
            )
        rows.sort(
            key=lambda r: (
                r.accelerator_count != GPUS_USED,
                r.accelerator_count,
                r.on_demand_usd_per_h,
                r.key,
            )
        )
        row = rows[0]
        why = (
            f"'{device_name}' is catalog accelerator {acc}; {len(rows)} rows have it, "
            f"{row.key} is the cheapest with {row.accelerator_count} GPU(s) (the check uses {GPUS_USED})"
        )
    if row.accelerator_count > GPUS_USED:
        why += f"; predicted as 1 of its {row.accelerator_count} GPUs"
    if device == "cuda" and row.accelerator is None:
        why += "; a CPU machine, so the GPU is compared with a CPU prediction"
    if device == "cpu" and row.accelerator is not None:
        why += "; a GPU row measured on this CPU: a check of the code path, not of the model"
    return one_gpu(row), why


# --- the short training, in a fresh process ----------------------------------------------------


def train_child() -> None:
    """(Child) train as the JSON on stdin says; print the timings as one JSON line."""
    spec = json.loads(sys.stdin.read())
    try:
        from advisor.probes.torch_loop import build_setup, configure, train

        configure(spec["threads"], spec["device"])
        setup, _, _ = build_setup(spec["workload"], spec["batch"], spec["n_train"], spec["n_val"])
        result = train(setup, spec["epochs"], device=spec["device"])
        keep = ("first_iteration_s", "steady_iteration_s", "validation_s", "runtime_s")
        out = {k: result[k] for k in keep}
        out.update(init_s=result["first_batch_wall"] - spec["start"], steps=result["iterations"])
    except Exception as exc:  # reported to the parent as this run's failure
        out = {"error": f"{type(exc).__name__}: {exc}"[:300]}
    print(json.dumps(out), flush=True)


def run_training(spec: dict[str, Any], timeout_s: float) -> dict[str, Any]:
    """Train in a child process (this file) so init is measured from process start."""
    spec = {**spec, "start": time.time()}
    try:
        proc = subprocess.run(
            [sys.executable, __file__],
            input=json.dumps(spec),
            capture_output=True,
            text=True,
            timeout=max(1.0, timeout_s),
        )
    except subprocess.TimeoutExpired:
        return {"error": f"the training ran past {timeout_s:.0f} s"}
    lines = [x for x in proc.stdout.splitlines() if x.startswith("{")]
    if not lines:
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        return {"error": f"the training exited with code {proc.returncode}: {tail[:200]}"}
    out: dict[str, Any] = json.loads(lines[-1])
    return out


# --- one (workload, batch) ---------------------------------------------------------------------


def _iv(iv: Any) -> dict[str, float]:
    return {"value": iv.value, "low": iv.low, "high": iv.high}


def _err(predicted: float, measured: float | None) -> float | None:
    return None if not measured else 100.0 * (predicted - measured) / measured


def _probe(workload: str, batch: int, device: str, args: argparse.Namespace, left: float) -> Any:
    from advisor.probes.result import ProbeRequest
    from advisor.probes.runner import run_probe

    request = ProbeRequest(
        workload=workload,
        batch_size=batch,
        device=device,
        iterations=args.probe_iterations,
        max_seconds=args.probe_max_s,
        gradient_noise=False,  # untimed extra batches: not needed here
        timeout_s=max(1.0, left),
    )
    return run_probe(request)


def check_one(
    workload: str, batch: int, args: argparse.Namespace, machine: Any, catalog: Any, end: float
) -> dict[str, Any]:
    """Probe on the CPU, predict, probe on the device, train; the per-phase comparison."""
    from advisor.search_spaces.workloads import get

    from advisor.evaluation.predict_api import predict
    from advisor.prediction.run.iteration_model import estimate, init_for_size

    spec = get(workload)
    n_train = min(spec.n_train, batch * args.train_steps)
    n_val = spec.n_val
    out: dict[str, Any] = {"workload": workload, "batch": batch, "status": "ok"}
    out["training_run"] = {"n_train": n_train, "n_val": n_val, "epochs": args.train_epochs}
    cpu = _probe(workload, batch, "cpu", args, end - time.monotonic())
    if not cpu.ok:
        return {**out, "status": "failed", "reason": f"CPU probe {cpu.status}: {cpu.reason}"}
    # the prediction is for the run trained below: init's data preparation rescaled to it
    cpu_run = dataclasses.replace(cpu, init_s=init_for_size(cpu, n_train, n_val))
    notes: list[str] = []
    pred = predict(workload, batch, machines=[machine], catalog=catalog, probe=cpu_run,
                   note=notes.append).rows[0].prediction  # fmt: skip
    phases = pred.phases
    out["prediction"] = {
        "machine": pred.machine, "kind": pred.kind, "source": phases.source,
        "bottleneck": pred.bottleneck, "note": phases.note, "notes": notes,
        "cpu_probe_t2_s": statistics.median(cpu.iteration_s[1:]),
    }  # fmt: skip
    dev = _probe(workload, batch, args.device, args, end - time.monotonic())
    probe: dict[str, float | None] = dict.fromkeys(("init", "t1", "t2", "v1", "v2"))
    if dev.ok:
        val = [*dev.validation_s, None, None]
        probe.update(init=init_for_size(dev, n_train, n_val), t1=dev.iteration_s[0],
                     t2=statistics.median(dev.iteration_s[1:]), v1=val[0], v2=val[1])  # fmt: skip
    else:
        out["probe_failure"] = f"{dev.status}: {dev.reason}"
    run = run_training(
        {"workload": workload, "batch": batch, "n_train": n_train, "n_val": n_val,
         "epochs": args.train_epochs, "device": args.device, "threads": None},
        end - time.monotonic(),
    )  # fmt: skip
    trained: dict[str, float | None] = dict.fromkeys(("init", "t1", "t2", "v1", "v2"))
    if "error" in run:
        out["training_failure"] = run["error"]
    else:
        val = [*run["validation_s"], None, None]
        trained.update(init=run["init_s"], t1=run["first_iteration_s"],
                       t2=run["steady_iteration_s"], v1=val[0], v2=val[1])  # fmt: skip
        out["training_run"].update(steps=run["steps"], total_s=run["init_s"] + run["runtime_s"])
    rows = []
    for key, label in PHASES:
        iv = getattr(phases, key)
        t = trained[key]
        rows.append({
            "phase": label, "predicted": _iv(iv), "probe": probe[key], "training": t,
            "error_pct_probe": _err(iv.value, probe[key]), "error_pct": _err(iv.value, t),
            "in_interval": None if t is None else iv.low <= t <= iv.high,
        })  # fmt: skip
    total = estimate(phases, n_train, n_val, args.train_epochs, batch).runtime
    t = out["training_run"].get("total_s")
    rows.append({
        "phase": "run total", "predicted": _iv(total), "probe": None, "training": t,
        "error_pct_probe": None, "error_pct": _err(total.value, t),
        "in_interval": None if t is None else total.low <= t <= total.high,
    })  # fmt: skip
    out["phases"] = rows
    if "error" in run and not dev.ok:
        out["status"] = "failed"
    return out


if __name__ == "__main__":
    train_child()
