"""The training entry point the managed tuning services run:
``python -m advisor.train --model fcn --batch-size 512 --epochs 14 --lr 0.05 ...``.

It trains a built-in (or ``module:function``) PyTorch workload and, after every epoch,
reports the metrics in the form each service reads:

- a log line ``advisor-metric: val_accuracy=0.9123;`` on stdout (SageMaker's metric regex,
  ``advisor.providers.tuning.metric_regex``, reads it);
- Vertex AI's hyperparameter-tuning report: ``hypertune`` (cloudml-hypertune) when installed,
  else the same JSON line it writes to ``$CLOUD_ML_HP_METRIC_FILE``
  (default ``/tmp/hypertune/output.metrics``) when running in a Vertex trial;
- ``mlflow.log_metric`` when MLflow is importable and a tracking run is configured (Azure ML).

Besides the objective it reports ``epoch_s`` and ``step_s`` (the epoch's median seconds per
training step, steps 2..n, timed as the probes time them): ``advisor import`` records
``step_s`` in the calibration ledger. Vertex's report carries the objective only.

On several machines (issue #49) it runs under ``torchrun``: started by it (or by Azure ML's
PyTorch distribution), each process trains as its rank; started by SkyPilot, SageMaker or
Vertex AI on N > 1 machines, it hands itself to ``torchrun`` with the launcher's rendezvous
(``advisor.train.launch``).

Hyperparameters come from the command line (any ``--name value`` not listed below is passed
to the workload builder) and, when present, from SageMaker's
``/opt/ml/input/config/hyperparameters.json`` (the command line wins).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from advisor.errors import AdvisorError
from advisor.providers.train_command import EXPECT_OPTIONS
from advisor.providers.tuning import DEFAULT_METRIC, METRIC_LINE
from advisor.search_spaces.workloads import ModelRef
from advisor.train.expect import Expected, end_line, measured_peak, start_line
from advisor.train.reporting import HYPERTUNE_FILE, Reporter

__all__ = ["HYPERTUNE_FILE", "Reporter", "main", "parse_args", "run"]

SAGEMAKER_HYPERPARAMETERS = "input/config/hyperparameters.json"  # under /opt/ml
_RESERVED = {
    "model", "batch_size", "epochs", "n_train", "n_val", "threads", "device", "metric",
    "seed", "patience", "report", "checkpoint_dir", "plan", *EXPECT_OPTIONS,
}  # fmt: skip


def parse_args(argv: Sequence[str] | None = None) -> tuple[argparse.Namespace, dict[str, Any]]:
    """Parse the fixed options and collect every other ``--name value`` as a hyperparameter."""
    parser = argparse.ArgumentParser(
        prog="python -m advisor.train", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--model", help="built-in workload name or module:function")
    parser.add_argument("--batch-size", "--batch_size", dest="batch_size", type=_int)
    parser.add_argument("--epochs", type=_int)
    parser.add_argument("--n-train", "--n_train", dest="n_train", type=_int)
    parser.add_argument("--n-val", "--n_val", dest="n_val", type=_int)
    parser.add_argument("--threads", type=_int)
    parser.add_argument(
        "--device", default=None, help="auto (default: CUDA when present), cuda, cpu or tpu"
    )
    parser.add_argument(
        "--checkpoint-dir", "--checkpoint_dir", dest="checkpoint_dir", default=None,
        help="checkpoint every epoch here and resume from it (default: the service's place)",
    )  # fmt: skip
    parser.add_argument("--seed", type=_int)
    parser.add_argument("--patience", type=_int)
    parser.add_argument(
        "--metric", default=None, help=f"objective metric (default {DEFAULT_METRIC})"
    )
    parser.add_argument(
        "--plan", default=None,
        help="training plan (issue #35): precision=bf16,accumulation=4,checkpointing=blocks,"
        "sharding=none|optimizer|gradients|parameters (docs/plans.md)",
    )  # fmt: skip
    for flag, what in (("peak-gib", "the step's peak memory per device, GiB"),
                       ("peak-high-gib", "its upper estimate, GiB"),
                       ("step-s", "the steady step time, seconds")):  # fmt: skip
        parser.add_argument(
            f"--expect-{flag}", dest=f"expect_{flag.replace('-', '_')}", type=float, default=None,
            help=f"what the report predicted (issue #45): {what}; printed beside the measured",
        )  # fmt: skip
    parser.add_argument("--hyperparameters-file", type=Path, default=None)
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["train"]:  # SageMaker starts the container as `<entrypoint> train`
        argv = argv[1:]
    args, rest = parser.parse_known_args(argv)
    hps = _pairs(rest, parser)
    from advisor.train.checkpoint import opt_ml

    from_file = _read_sagemaker(args.hyperparameters_file or opt_ml() / SAGEMAKER_HYPERPARAMETERS)
    for key in _RESERVED:
        if getattr(args, key, None) is None and key in from_file:
            setattr(args, key, from_file[key])
    merged = {k: v for k, v in from_file.items() if k not in _RESERVED}
    merged.update(hps)
    if args.model is None:
        parser.error("--model is required (or 'model' in the SageMaker hyperparameters)")
    args.batch_size = _int(args.batch_size) if args.batch_size is not None else 256
    args.epochs = _int(args.epochs) if args.epochs is not None else 1
    args.metric = args.metric or DEFAULT_METRIC
    args.seed = _int(args.seed) if args.seed is not None else 0
    args.device = str(args.device or "auto")
    for key in ("n_train", "n_val", "threads", "patience"):
        value = getattr(args, key)
        setattr(args, key, _int(value) if value is not None else None)
    return args, merged


def _pairs(rest: list[str], parser: argparse.ArgumentParser) -> dict[str, Any]:
    out: dict[str, Any] = {}
    i = 0
    while i < len(rest):
        token = rest[i]
        if not token.startswith("--"):
            parser.error(f"unexpected argument {token!r}")
        name, eq, value = token[2:].partition("=")
        if not eq:
            if i + 1 >= len(rest):
                parser.error(f"{token} needs a value")
            value = rest[i + 1]
            i += 1
        out[name.replace("-", "_")] = _value(value)
        i += 1
    return out


def _read_sagemaker(path: Path) -> dict[str, Any]:
    """SageMaker's hyperparameters (all strings), minus its own internal keys."""
    if not path.is_file():
        return {}
    raw = json.loads(path.read_text())
    return {
        k.replace("-", "_"): _value(v)
        for k, v in raw.items()
        if not k.startswith(("_", "sagemaker_"))
    }


def _value(text: Any) -> Any:
    if not isinstance(text, str):
        return text
    try:
        return int(text)
    except ValueError:
        pass
    try:
        number = float(text)
    except ValueError:
        pass
    else:
        # Vertex sends a discrete (numeric categorical) value as a double: "64.0" is 64.
        return int(number) if number.is_integer() and "e" not in text.lower() else number
    return {"true": True, "false": False}.get(text.lower(), text)


def _int(value: Any) -> int:
    return round(float(value))


# -- main ---------------------------------------------------------------------------------------


def run(
    argv: Sequence[str] | None = None, out: Callable[[str], None] | None = None
) -> dict[str, Any]:
    """Train as the command line says and report every epoch; return the training summary
    (rank 0's, when training runs on several GPUs)."""
    from advisor.train import launch
    from advisor.train.device import detect

    args, hps = parse_args(argv)
    from advisor.search_spaces.hf.ref import for_the_run

    args.model = for_the_run(args.model)  # issue #48: an hf: model's weights, loaded here
    ranks = launch.launched()
    if ranks is not None:  # torchrun (or Azure ML) started this process as one rank
        return _as_rank(ranks, args, hps, out)
    plan = detect(args.device)
    where = launch.cluster()
    if where is not None and where.nodes > 1:
        launch.relaunch(where, where.gpus_per_node or plan.count,
                        list(sys.argv[1:] if argv is None else argv))  # fmt: skip
        return {"launched": "torchrun", "nodes": where.nodes, "node_rank": where.node_rank}
    if plan.distributed:
        import multiprocessing

        from advisor.train.device import spawn

        queue = multiprocessing.get_context("spawn").SimpleQueue()
        spawn(_rank_main, plan, args, hps, queue)
        summary: dict[str, Any] = queue.get()
        return summary
    return _train(0, plan, args, hps, out)


def _as_rank(
    ranks: Any, args: argparse.Namespace, hps: dict[str, Any], out: Callable[[str], None] | None
) -> dict[str, Any]:
    """Train as rank ``ranks.rank`` of the world ``torchrun`` made, on every machine."""
    import torch.distributed as dist

    from advisor.train.device import init_rank, joined

    plan = joined(args.device, ranks)
    if not plan.distributed:
        return _train(0, plan, args, hps, out)
    init_rank(ranks.rank, plan)
    try:
        return _train(ranks.rank, plan, args, hps, out)
    finally:
        dist.destroy_process_group()


def _rank_main(rank: int, plan: Any, args: argparse.Namespace, hps: dict[str, Any], q: Any) -> None:
    """One spawned rank: train, rank 0 reports, then every rank leaves the process group
    together. A rank that exited with the group still up aborted now and then ("terminate
    called without an active exception": the backend's threads torn down with the process;
    3 of 7 two-process ZeRO-3 runs of the sharded-plan test on a busy 2-core machine)."""
    import torch.distributed as dist

    from advisor.train.device import init_rank

    init_rank(rank, plan)
    try:
        result = _train(rank, plan, args, hps, None)
        if rank == 0:
            q.put({k: v for k, v in result.items() if isinstance(v, int | float | str | list)})
        dist.barrier()  # the others are done with the group too
    finally:
        dist.destroy_process_group()


def _train(
    rank: int,
    plan: Any,
    args: argparse.Namespace,
    hps: dict[str, Any],
    out: Callable[[str], None] | None,
) -> dict[str, Any]:
    from advisor.probes.sharding import is_sharded, uses_fsdp
    from advisor.probes.torch_loop import build_setup, configure, train
    from advisor.train import checkpoint as ckpt
    from advisor.train.device import distribute, torch_device

    lead = rank == 0
    threads, _ = configure(args.threads, "cpu")
    device = torch_device(plan, rank)
    report = Reporter(args.metric, out if lead else (lambda line: None))
    folder = ckpt.checkpoint_dir(args.checkpoint_dir)
    report.out(
        f"advisor-train: device={plan.describe()} model={args.model} "
        f"batch_size={args.batch_size} epochs={args.epochs} threads={threads} "
        f"checkpoints={folder or 'none'} hyperparameters={json.dumps(hps, sort_keys=True)}"
    )
    training_plan = _training_plan(args.plan)
    expected = Expected.from_args(args)
    report.out(start_line(_plan_words(training_plan, args.batch_size, plan.count), expected))
    if lead:
        report.params({"model": args.model, "batch_size": args.batch_size,
                       "epochs": args.epochs, **hps})  # fmt: skip
    builder_args = {**hps, **_epochs_arg(args.model, args.epochs)}
    setup, _, _ = build_setup(
        args.model, args.batch_size, args.n_train, args.n_val, seed=args.seed,
        hyperparameters=builder_args,
    )  # fmt: skip
    setup.model.to(device)  # before restoring, so optimizer state lands on the device
    done, history = ckpt.load(folder, setup)
    if done:
        report.out(f"advisor-train: resumed from {folder} after epoch {done}")
    if plan.distributed:  # FSDP shards the model instead of DDP (advisor.probes.sharding)
        fsdp = training_plan is not None and uses_fsdp(training_plan.sharding)
        setup = distribute(setup, plan, rank, args.seed, wrap=not fsdp)
    setup, step = _plan_step(training_plan, setup, plan, device.type, report)
    if done >= args.epochs:
        report.out("advisor-train: every epoch was already done")
        return {"epochs_run": 0, "resumed_from": done, "runtime_s": 0.0}

    sharded = is_sharded(setup)

    def on_epoch(epoch: int, metrics: dict[str, float]) -> None:
        sampler: Any = getattr(setup.train_loader, "sampler", None)
        if hasattr(sampler, "set_epoch"):  # a DistributedSampler reshuffles per epoch
            sampler.set_epoch(done + epoch + 1)
        history.append(dict(metrics))
        report(done + epoch, metrics)
        if folder is not None and (lead or sharded):  # a sharded state: gathered by all
            ckpt.save(folder, setup, done + epoch + 1, history, write=lead)

    result = train(setup, args.epochs - done, on_epoch=on_epoch, device=str(device),
                   patience=args.patience, step=step)  # fmt: skip
    result["resumed_from"] = done
    report.out(METRIC_LINE.format(name="runtime_s", value=result["runtime_s"]))
    line, measured = end_line(expected, measured_peak(device), result.get("steady_iteration_s"))
    report.out(line)  # issue #45: what the run measured, beside what the report predicted
    report.final(measured)
    result.update(measured)
    return result


def _plan_words(training_plan: Any, batch_size: int, devices: int) -> str:
    """The plan in words with each device's micro-batch (the report's words)."""
    if training_plan is None:
        return "fp32, the plain step (no --plan)"
    return str(training_plan.words(math.ceil(batch_size / max(devices, 1))))


def _training_plan(text: str | None) -> Any:
    """The ``TrainingPlan`` of ``--plan`` (issue #35), or None for the plain float32 step."""
    from advisor.prediction.step.plan import parse_plan

    return parse_plan(str(text)) if text else None


def _plan_step(
    training_plan: Any, setup: Any, plan: Any, device: str, report: Any
) -> tuple[Any, Any]:
    """``setup`` made ready for the plan, and the plan's step (None: the plain float32 step).
    FSDP shards over the device mesh of ``plan`` (HSDP across machines where the training plan
    replicates across them)."""
    if training_plan is None:
        return setup, None
    from advisor.probes.sharding import uses_fsdp
    from advisor.train.device import mesh
    from advisor.train.plan_step import make_step, prepare

    grid = None
    if plan.distributed and uses_fsdp(training_plan.sharding):
        grid = mesh(plan, training_plan.replicate == "nodes")
    setup = prepare(setup, training_plan, plan.distributed, grid)
    return setup, make_step(training_plan, device)


def _epochs_arg(model: str, epochs: int) -> dict[str, int]:
    """``{"epochs": epochs}`` when the workload's builder takes the number of epochs (its
    learning-rate schedule spans them), else nothing."""
    import inspect

    from advisor.search_spaces.workloads import get, load_callable

    builder = load_callable(model) if ModelRef(model).is_user else get(model).builder("torch")
    params = inspect.signature(builder).parameters
    takes = "epochs" in params or any(p.kind is p.VAR_KEYWORD for p in params.values())
    return {"epochs": epochs} if takes else {}


def main(argv: Sequence[str] | None = None) -> int:
    """The entry point: exit 2 with one line for a user error (bad device, bad values)."""
    try:
        run(argv)
    except AdvisorError as exc:
        print(f"advisor-train: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
