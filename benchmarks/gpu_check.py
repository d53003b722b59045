"""Check the performance model on a real GPU (issues #14 section 5, #26 section 6).

For each (workload, batch) it runs, on the machine it runs on:

1. the advisor's own probe on the CPU (``advisor.probes.runner.run_probe``, device cpu);
2. ``advisor.predict`` from that probe for the catalog row of this machine's GPU (its name
   from ``torch.cuda.get_device_name()``, one GPU: the check uses ``cuda:0``; ``--machine
   KEY`` overrides). With ``--device cpu`` the row is ``local`` (this machine), so the
   "prediction" is the CPU probe's phases extrapolated by the iteration-time model;
3. the same probe on the device (``device="cuda"``; ``probes/torch_loop.StepTimer``
   synchronises CUDA before every time stamp, so no change was needed there);
4. a short real training on the device in a fresh process (``advisor.probes.torch_loop.train``:
   the loop ``python -m advisor.train`` runs), ``--train-epochs`` epochs of ``--train-steps``
   steps on the workload's generated data with the full validation set, timed per phase:
   init (process start to first batch ready), first iteration, steady iteration (median),
   first and later validation pass, and the run's total;
6. (issue #34, on by default, ``--no-memory`` skips it) the memory model's predicted peak of a
   step beside ``torch.cuda.max_memory_allocated()`` and ``max_memory_reserved()`` of a real
   steady-state step on the device (in CPU mode the profiler's allocated peak;
   ``benchmarks/gpu_check_memory.py``);
5. (issue #26, ``--operators``, on by default) the same step under the torch profiler: device
   time per phase and operator kind (conv, matmul, norm/softmax, optimizer, other) against the
   GPU kernel model on its operator trace, the whole step's device and wall time, the kernels
   launched per step against the trace's count, and the host's time per launch against the
   dispatch floor's 60 us prior (``benchmarks/gpu_check_ops.py``).

The prediction is made for the run that is trained (its init's data preparation rescaled to
the samples trained on, ``iteration_model.init_for_size``), from a fresh ``ADVISOR_HOME``
(no cached probes, no calibration ledger), so the model alone is checked. Error % is
``(predicted - measured) / measured``; "in" says whether the training's figure lies in the
predicted interval. ``--budget-s`` bounds the whole run: a (workload, batch) that would not
fit is skipped and listed. Batches run smallest first across the workloads.

    python benchmarks/gpu_check.py [--device cuda|cpu] [--workloads fcn,simple-cnn,resnet50]
        [--batches 64,128,256,512] [--budget-s 500] [--machine KEY] [--no-operators]
        [--ops-gpu NAME] [--json] [--write-docs]

On a lent GPU machine (device tool, ``nvidia-h100-x1`` or ``nvidia-h200``): its image has
PyTorch (CUDA build), numpy, scikit-learn, click, rich, PyYAML, psutil and matplotlib but no
internet; a fresh ADVISOR_HOME needs no Optuna. Install the advisor from the working tree
that travels and run the check in one call (``timeout_s`` 600)::

    python3 -m pip install -q --no-deps --no-build-isolation --no-index --target /tmp/site . \
      && export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 && cd /tmp \
      && python3 $OLDPWD/benchmarks/gpu_check.py --budget-s 480 --write-docs --json \
         >$OUT/gpu_check.json; cp $OLDPWD/docs/benchmarks.md $OUT/

(progress goes to stderr, the output tail); ``benchmarks/gpu_round.sh`` runs it that way
after the plans' memory benchmarks, in one call (2026-11-28). Run it from outside the
checkout (``cd /tmp``):
there the probe's child process, started with ``python -m advisor.probes.child``, would find
the checkout's ``advisor/`` folder first, which has no ``probes`` (the package maps it from
``probes/``), and every case fails with "No module named 'advisor.probes'" (seen on the H200,
2026-11-27). A case that does not fit is skipped and listed:
run those in a second call (e.g. ``--workloads resnet50 --batches 256,512``). Then copy the
section it appended to the returned ``benchmarks.md`` into docs/benchmarks.md here and commit
it. The per-operator comparison needs the operator trace and the kernel model, which travel
with the package (no extra dependency). Checked without a GPU: that install into ``--target``
and a ``--device cpu`` run from it with Optuna made unimportable. The case runner and the
training child are ``benchmarks/gpu_check_case.py``; the profiler comparison
``benchmarks/gpu_check_ops.py``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import statistics
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gpu_check_case import PHASES, CheckError, check_one, choose_machine
from gpu_check_memory import line as memory_line
from gpu_check_memory import memory_case
from gpu_check_ops import profile_case
from gpu_check_ops import table as operators_table

DOCS = Path(__file__).resolve().parents[1] / "docs" / "benchmarks.md"
NO_GPU = (
    "no GPU here (torch.cuda.is_available() is False); run it on a GPU machine or pass --device cpu"
)

MIN_CASE_S = 15.0  # a workload's first case: three process starts, a probe each, a training

LEGEND = (
    "Predicted: `advisor.predict` from a CPU probe, [interval]; device probe: the advisor's "
    "probe on the device (in CPU mode a second CPU probe); training: a real run in a fresh "
    "process; error % = (predicted - training) / training, in brackets vs the device probe; "
    "in: the training's figure lies in the interval."
)


# --- output ------------------------------------------------------------------------------------


def _s(x: float | None) -> str:
    return "-" if x is None else f"{x:.4g}"


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:+.0f} %"


def table(result: dict[str, Any]) -> str:
    """The markdown table of one (workload, batch)."""
    run = result["training_run"]
    head = f"**{result['workload']}, batch {result['batch']}**"
    if result["status"] != "ok":
        return f"{head}: {result['status']} ({result.get('reason', '')})"
    pred = result["prediction"]
    lines = [
        f"{head}: predicted for {pred['machine']} ({pred['kind']}"
        + (f", limit {pred['bottleneck']}" if pred["bottleneck"] else "")
        + f"); training {run.get('steps', '-')} steps on {run['n_train']} samples, "
        f"{run['epochs']} epochs, validation on {run['n_val']}",
        "",
        "| phase (s) | predicted [interval] | device probe | training | error % (vs probe) | in |",
        "|---|---|---|---|---|---|",
    ]
    for r in result["phases"]:
        p = r["predicted"]
        inside = {None: "-", True: "yes", False: "no"}[r["in_interval"]]
        lines.append(
            f"| {r['phase']} | {_s(p['value'])} [{_s(p['low'])}-{_s(p['high'])}] | "
            f"{_s(r['probe'])} | {_s(r['training'])} | {_pct(r['error_pct'])} "
            f"({_pct(r['error_pct_probe'])}) | {inside} |"
        )
    for key in ("probe_failure", "training_failure"):
        if key in result:
            lines.append(f"\n{key.replace('_', ' ')}: {result[key]}")
    if "memory" in result:  # issue #34
        lines += ["", memory_line(result["memory"])]
    if "operators" in result:  # issue #26
        lines += ["", operators_table(result["operators"])]
    return "\n".join(lines)


def summary(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per phase over the checked cases: median |error %| and how many fell in the interval."""
    rows = []
    for label in [p for _, p in PHASES] + ["run total"]:
        found = [r for res in results for r in res.get("phases", []) if r["phase"] == label]
        errs = [abs(r["error_pct"]) for r in found if r["error_pct"] is not None]
        inside = [r["in_interval"] for r in found if r["in_interval"] is not None]
        rows.append({
            "phase": label, "cases": len(errs),
            "median_abs_error_pct": statistics.median(errs) if errs else None,
            "in_interval": sum(inside),
        })  # fmt: skip
    return rows


def totals(rows: list[dict[str, Any]]) -> str:
    """The summary over several cases as a markdown table."""
    lines = [
        "**Totals** (training vs predicted, over the cases above)",
        "",
        "| phase | cases | median abs error | in interval |",
        "|---|---|---|---|",
    ]
    for r in rows:
        err = _pct(r["median_abs_error_pct"]).lstrip("+")
        lines.append(f"| {r['phase']} | {r['cases']} | {err} | {r['in_interval']} |")
    return "\n".join(lines)


def report(doc: dict[str, Any]) -> str:
    """The whole run as markdown: header, one table per case, totals, skipped cases."""
    parts = [
        f"Device: {doc['device_name']} ({doc['device']}); predicted for {doc['machine']}: "
        f"{doc['machine_why']}. Catalog {doc['snapshot']}, torch {doc['torch']}.",
        *[table(r) for r in doc["results"]],
        *([totals(doc["summary"])] if len(doc["results"]) > 1 else []),
        f"Run: {doc['elapsed_s']:.0f} s of a {doc['budget_s']:.0f} s budget; "
        f"{len(doc['results'])} case(s) checked, {len(doc['skipped'])} skipped"
        + "".join(f"\n- skipped {s['workload']} b{s['batch']}: {s['reason']}" for s in doc["skipped"]),
    ]  # fmt: skip
    return "\n\n".join(parts)


def write_docs(doc: dict[str, Any], text: str, path: Path, command: str) -> None:
    """Append a dated section with the command and the device to ``path``."""
    title = f"\n## GPU check, {dt.date.today().isoformat()}: {doc['device_name']}\n\n"
    note = "" if doc["device"] == "cuda" else "No GPU was available: CPU mode. "
    legend = textwrap.fill(note + LEGEND, 95, break_on_hyphens=False)
    body = f"    {command}\n\n{legend}\n\n{text}\n"
    with path.open("a", encoding="utf-8") as fh:
        fh.write(title + body)


# --- main --------------------------------------------------------------------------------------


def _parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    p.add_argument("--workloads", default="fcn,simple-cnn,resnet50")
    p.add_argument("--batches", default="64,128,256,512")
    p.add_argument("--budget-s", type=float, default=500.0, help="the whole run")
    p.add_argument("--machine", help="catalog row to predict for (default: this GPU's)")
    p.add_argument("--snapshot", help="catalog snapshot (default: the newest)")
    p.add_argument("--probe-iterations", type=int, default=20, help="as advisor predict's")
    p.add_argument("--probe-max-s", type=float, default=10.0, help="time box of its steps")
    p.add_argument("--train-steps", type=int, default=100, help="steps per training epoch")
    p.add_argument("--train-epochs", type=int, default=2)
    p.add_argument("--no-operators", dest="operators", action="store_false",
                   help="skip the per-operator profile against the kernel model")  # fmt: skip
    p.add_argument("--no-memory", dest="memory", action="store_false",
                   help="skip the memory model's peak against the measured one")  # fmt: skip
    p.add_argument("--ops-gpu", default="T4", help="--device cpu: the GPU the kernel model "
                   "predicts the operators on (a code-path check)")  # fmt: skip
    p.add_argument("--json", action="store_true", help="print the results as JSON")
    p.add_argument("--write-docs", action="store_true", help=f"append a section to {DOCS.name}")
    p.add_argument("--docs", type=Path, default=DOCS, help=argparse.SUPPRESS)
    return p.parse_args(argv)


def _ints(text: str, what: str) -> list[int]:
    try:
        values = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise CheckError(f"--{what} takes comma-separated integers, not '{text}'") from None
    if not values or min(values) <= 0:
        raise CheckError(f"--{what} needs integers > 0, but got '{text}'")
    return values


def run(args: argparse.Namespace, log: Any) -> dict[str, Any]:
    """The whole check; the JSON document."""
    try:
        import torch
    except ImportError:
        raise CheckError("torch is not installed; pip install torch") from None
    if args.device == "cuda" and not torch.cuda.is_available():
        raise CheckError(NO_GPU)
    from advisor.providers import catalog as catalog_mod
    from advisor.search_spaces.workloads import get

    from advisor.errors import AdvisorError

    batches = sorted(set(_ints(args.batches, "batches")))
    workloads = [w.strip() for w in args.workloads.split(",") if w.strip()]
    if args.train_steps < 2 or args.train_epochs < 1 or args.probe_iterations < 3:
        raise CheckError("--train-steps needs >= 2, --train-epochs >= 1, --probe-iterations >= 3")
    try:
        for w in workloads:
            get(w)
        catalog = catalog_mod.load(args.snapshot)
        name = torch.cuda.get_device_name(0) if args.device == "cuda" else _cpu_name()
        machine, why = choose_machine(catalog, args.device, name, args.machine)
    except AdvisorError as exc:
        raise CheckError(str(exc)) from None
    log(f"predicting for {machine.key}: {why}")
    start = time.monotonic()
    end = start + args.budget_s
    results: list[dict[str, Any]] = []
    skipped: list[dict[str, Any]] = []
    took: dict[str, tuple[int, float]] = {}  # workload -> (batch, seconds) of its last case
    for batch in batches:
        for w in workloads:
            left = end - time.monotonic()
            last = took.get(w)
            need = last[1] * (batch / last[0]) ** 0.5 if last else MIN_CASE_S
            if left <= 0 or need > left:
                skipped.append({"workload": w, "batch": batch,
                                "reason": f"needs about {need:.0f} s, {max(left, 0):.0f} s left"})  # fmt: skip
                log(f"skip {w} b{batch}: {skipped[-1]['reason']}")
                continue
            log(f"{w} b{batch}: CPU probe, prediction, {args.device} probe, training")
            t0 = time.monotonic()
            try:
                res = check_one(w, batch, args, machine, catalog, end)
            except AdvisorError as exc:
                res = {"workload": w, "batch": batch, "status": "failed", "reason": str(exc)}
            if args.memory and res.get("status") == "ok":
                res["memory"] = _memory(w, batch, args, machine, catalog)
            if args.operators and res.get("status") == "ok":
                res["operators"] = _operators(w, batch, args, machine)
            res["check_s"] = time.monotonic() - t0
            took[w] = (batch, res["check_s"])
            results.append(res)
            log(
                f"  {res['status']} in {res['check_s']:.0f} s"
                + (f": {res['reason']}" if "reason" in res else "")
            )
    doc = {
        "device": args.device, "device_name": name, "machine": machine.key, "machine_why": why,
        "snapshot": catalog.snapshot, "torch": torch.__version__, "budget_s": args.budget_s,
        "elapsed_s": time.monotonic() - start, "results": results, "skipped": skipped,
    }  # fmt: skip
    doc["summary"] = summary(results)
    return doc


def _operators(workload: str, batch: int, args: argparse.Namespace, machine: Any) -> Any:
    """Issue #26: the profiled step against the kernel model on this machine's GPU (in CPU
    mode ``--ops-gpu``); a failure is reported in the section, never raised."""
    gpu = machine.accelerator if args.device == "cuda" and machine.accelerator else args.ops_gpu
    try:
        return profile_case(workload, batch, args.device, gpu)
    except Exception as exc:  # the phase comparison above still stands
        return {"error": f"{type(exc).__name__}: {exc}"[:300]}


def _memory(
    workload: str, batch: int, args: argparse.Namespace, machine: Any, catalog: Any
) -> dict[str, Any]:
    """Issue #34: the memory model's peak beside the measured one; a failure is reported in
    the section, never raised."""
    acc = catalog.accelerators.get(machine.accelerator) if machine.accelerator else None
    try:
        return memory_case(workload, batch, args.device, acc.generation if acc else None)
    except Exception as exc:  # the phase comparison above still stands
        return {"error": f"{type(exc).__name__}: {exc}"[:300]}


def _cpu_name() -> str:
    from advisor.probes.host import cpu_model

    return f"CPU: {cpu_model()}, {os.cpu_count()} logical cores"


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    log = (lambda s: print(s, file=sys.stderr, flush=True)) if args.json else print
    home = os.environ.get("ADVISOR_HOME")
    with tempfile.TemporaryDirectory(prefix="gpu-check-") as fresh:
        os.environ["ADVISOR_HOME"] = fresh  # no cached probes, no calibration ledger
        try:
            doc = run(args, log)
        except CheckError as exc:
            print(str(exc), file=sys.stderr)
            return 2
        finally:
            if home is None:
                os.environ.pop("ADVISOR_HOME", None)
            else:
                os.environ["ADVISOR_HOME"] = home
    text = report(doc)
    if args.json:
        print(json.dumps(doc, indent=1))
    else:
        print("\n" + text)
    if args.write_docs:
        command = "python benchmarks/gpu_check.py " + " ".join(argv or sys.argv[1:])
        write_docs(doc, text, args.docs, command.strip())
        keep_raw(doc, args.docs.parent / "data")
    return 0


def keep_raw(doc: dict[str, Any], folder: Path) -> Path:
    """The raw JSON of a run kept beside the docs (``docs/data/gpu_check-<device>-<date>.json``),
    so a later reading can go back to every figure (issue #45)."""
    folder.mkdir(parents=True, exist_ok=True)
    device = str(doc.get("device_name") or doc.get("device") or "unknown")
    device = "".join(c if c.isalnum() or c in "-_." else "_" for c in device)
    path = folder / f"gpu_check-{device}-{time.strftime('%Y-%m-%d')}.json"
    path.write_text(json.dumps(doc, indent=1), encoding="utf-8")
    return path


if __name__ == "__main__":
    sys.exit(main())
