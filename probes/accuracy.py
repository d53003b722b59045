"""Short training runs that report a validation metric every fraction of an epoch.

``short_run(request, on_check)`` builds a PyTorch workload (built-in or ``module:function``)
at one batch size with the given hyperparameters and trains it for at most ``request.epochs``
epochs, running a full validation pass after every ``1/checks_per_epoch`` of an epoch (after
the optimizer step that ends that fraction). Each check calls ``on_check(check)``; it returns
False to stop the run there (a pruner's decision, or the time budget), so a caller reports
each value to Optuna (``trial.report``) and asks ``trial.should_prune()`` between checks.

Check ``k`` (1-based) falls after ``round(k * steps_per_epoch / checks_per_epoch)`` steps of
its epoch, so every batch size is checked after the same number of samples: runs at different
batch sizes compare at equal epochs. The validation passes restore torch's global random state,
so a run's training is the same whatever the number of checks (as in
``benchmarks/epochs_to_target.py``). The metric is the validation accuracy for classifiers,
else the validation loss. Importing this module imports torch.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

import torch
from advisor.probes.framework import LossDiverged
from advisor.probes.short_run import Check, ShortRunRequest, ShortRunResult, check_steps
from advisor.probes.torch_loop import build_setup, configure, to_device, train_step, validate

__all__ = ["Check", "ShortRunRequest", "ShortRunResult", "measure_cost", "short_run"]


def short_run(request: ShortRunRequest, on_check: Callable[[Check], bool]) -> ShortRunResult:
    """Train ``request`` and call ``on_check`` at each check until it returns False or the run
    ends. A NaN or infinite loss ends the run as failed (``ended="failed"``, ``error`` says
    so); any other exception propagates (a builder refusing a value, out of memory)."""
    started = time.perf_counter()
    configure(request.threads)
    hps = dict(request.hyperparameters)
    hps.setdefault("epochs", request.epochs)  # a schedule over the run (fcn's cosine)
    setup, _, _ = build_setup(
        request.workload, request.batch_size, request.n_train, request.n_val, request.seed, hps
    )
    result = ShortRunResult(build_s=time.perf_counter() - started)
    device = torch.device("cpu")
    steps_per_epoch = len(setup.train_loader)
    marks = set(check_steps(steps_per_epoch, request.checks_per_epoch))
    index = 0
    try:
        for epoch in range(request.epochs):
            step = 0
            for batch in setup.train_loader:
                train_step(setup, to_device(batch, device), device)
                step += 1
                result.steps += 1
                if step not in marks:
                    continue
                index += 1
                check = _check(setup, device, index, epoch + step / steps_per_epoch, started)
                result.checks.append(check)
                if not math.isfinite(check.value):
                    raise LossDiverged(f"validation {check.metric} became {check.value}")
                if not on_check(check) and index < request.checks:
                    result.ended = "stopped"
                    return result
            if setup.scheduler is not None:
                setup.scheduler.step()
    except LossDiverged as exc:
        result.ended, result.error = "failed", f"loss diverged: {exc}"
    finally:
        result.wall_s = time.perf_counter() - started
    return result


def _check(setup: Any, device: Any, index: int, epochs: float, started: float) -> Check:
    """One validation pass, torch's random state kept as it was (the data loader draws a seed
    from it, dropout uses it)."""
    state = torch.get_rng_state()
    loss, accuracy, _, _ = validate(setup, device)
    torch.set_rng_state(state)
    classify = not math.isnan(accuracy)
    return Check(
        index=index,
        epochs=round(epochs, 6),
        metric="val_accuracy" if classify else "val_loss",
        value=accuracy if classify else loss,
        val_loss=loss,
        elapsed_s=time.perf_counter() - started,
    )


def measure_cost(
    workload: str, batch_size: int, n_val: int, threads: int | None = None, steps: int = 4
) -> tuple[float, float]:
    """Seconds per training sample and per validation sample here: ``steps`` steps at
    ``batch_size`` (the first, warm-up, not counted) and one validation pass. For a study whose
    screen has no probe of this machine at that batch size."""
    configure(threads)
    setup, _, _ = build_setup(workload, batch_size, batch_size * steps, n_val, 0, {})
    device = torch.device("cpu")
    stamps = []
    for batch in setup.train_loader:
        train_step(setup, to_device(batch, device), device)
        stamps.append(time.perf_counter())
    per_step = (stamps[-1] - stamps[0]) / max(1, len(stamps) - 1)
    _, _, seen, seconds = validate(setup, device)
    return per_step / batch_size, seconds / max(1, seen)
