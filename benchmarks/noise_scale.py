"""The gradient noise scale on the built-in workloads: repeatability and growth (issue #19).

``repeat``: for each seed, the probe's setup (the workload at ``--batch``, ``16 x batch``
generated samples, default learning rate), ``--steps`` training steps as the probe times
them, then at those weights, on the same data: the first version (two halves per batch, 8
batches, per-batch estimates averaged), the pooled estimator on the same halves and 8
batches, and the pooled one the probe now uses (8 micro-batches per batch, 16 batches). The
spread over seeds is the noise scale's own variation with data, initialisation and dropout.

``growth``: one training run of the full workload (its real dataset size, batch ``--batch``,
default learning rate and schedule), the pooled ``B_simple`` measured (16 batches, untimed,
no step) at the given steps.

Run: ``nice -n 10 python benchmarks/noise_scale.py repeat --workload fcn --out r.json``.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any


def _measure_both(setup: Any, device: Any) -> dict[str, Any]:
    from advisor.probes.gradient_noise_frameworks import torch_gradient_noise
    from advisor.probes.torch_loop import split_batch, to_device

    def batches() -> Any:
        return (split_batch(to_device(b, device)) for b in setup.train_loader)

    t0 = time.perf_counter()
    first = _first_version(setup, batches())
    t1 = time.perf_counter()
    halves = torch_gradient_noise(
        setup.model, setup.loss_fn, batches(), max_batches=8, max_seconds=None, chunks=2
    )
    new = torch_gradient_noise(setup.model, setup.loss_fn, batches(), max_seconds=None)
    return {
        "first_version_8_batches": first.to_dict(),
        "first_version_s": t1 - t0,
        "pooled_halves_8_batches": halves.to_dict() if halves else None,
        "pooled_16_batches": new.to_dict() if new else None,
    }


def _first_version(setup: Any, batches: Any) -> Any:
    """The estimator the probe used before: two halves per batch, 8 batches, per-batch
    ``|G|^2`` and ``tr(Sigma)`` averaged, then the ratio (``estimate_noise_scale``)."""
    import torch
    from advisor.probes.gradient_noise import estimate_noise_scale

    params = [p for p in setup.model.parameters() if p.requires_grad]

    def grad(x: Any, y: Any) -> Any:
        for p in params:
            p.grad = None
        setup.loss_fn(setup.model(x), y).backward()
        return torch.cat([p.grad.reshape(-1) for p in params]).double()

    small, big, half = [], [], 0
    for inputs, targets in batches:
        if len(small) == 8:
            break
        half = len(inputs) // 2
        g1 = grad(inputs[:half], targets[:half])
        g2 = grad(inputs[half : 2 * half], targets[half : 2 * half])
        small.append(float((g1 @ g1 + g2 @ g2) / 2))
        big.append(float(((g1 + g2) / 2) @ ((g1 + g2) / 2)))
    for p in params:
        p.grad = None
    return estimate_noise_scale(small, big, half, 2 * half)


def repeat(args: argparse.Namespace) -> list[dict[str, Any]]:
    """The estimators after ``--steps`` probe steps, for ``--seeds`` seeds from ``--first-seed``."""
    import torch
    from advisor.probes.gradient_noise import NOISE_BATCHES
    from advisor.probes.torch_loop import build_setup, to_device, train_step

    device = torch.device("cpu")
    out = []
    for seed in range(args.first_seed, args.first_seed + args.seeds):
        setup, _, _ = build_setup(args.workload, args.batch, args.batch * NOISE_BATCHES, 64, seed)
        it = iter(setup.train_loader)
        for _ in range(args.steps):
            train_step(setup, to_device(next(it), device), device)
        row = {"seed": seed, **_measure_both(setup, device)}
        out.append(row)
        print(json.dumps({k: _short(v) for k, v in row.items()}), flush=True)
    return out


def growth(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Pooled ``B_simple`` at ``--at`` steps of one run of the full workload."""
    import torch
    from advisor.probes.gradient_noise_frameworks import torch_gradient_noise
    from advisor.probes.torch_loop import build_setup, split_batch, to_device, train_step

    device = torch.device("cpu")
    setup, _, _ = build_setup(args.workload, args.batch, None, 64, args.seed)
    n = len(setup.train_loader.dataset)
    steps_per_epoch = len(setup.train_loader)
    marks = sorted(set(args.at))
    out: list[dict[str, Any]] = []
    step, start = 0, time.perf_counter()
    while marks:
        for batch in setup.train_loader:
            if marks and step == marks[0]:
                marks.pop(0)
                fresh = (split_batch(to_device(b, device)) for b in setup.train_loader)
                ns = torch_gradient_noise(setup.model, setup.loss_fn, fresh, max_seconds=None)
                row = {
                    "step": step,
                    "epoch": step / steps_per_epoch,
                    "n_train": n,
                    "noise": ns.to_dict() if ns else None,
                    "elapsed_s": time.perf_counter() - start,
                }
                out.append(row)
                print(json.dumps({k: _short(v) for k, v in row.items()}), flush=True)
            if not marks:
                break
            train_step(setup, to_device(batch, device), device)
            step += 1
        if setup.scheduler is not None:
            setup.scheduler.step()  # the workloads' schedules step per epoch
    return out


def _short(v: Any) -> Any:
    if isinstance(v, dict) and "value" in v:
        return {k: v[k] for k in ("value", "low", "high", "iterations", "overhead_s")}
    return v


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("mode", choices=["repeat", "growth"])
    parser.add_argument("--workload", default="fcn")
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--first-seed", type=int, default=0, help="repeat: seeds from this")
    parser.add_argument("--seed", type=int, default=0, help="growth: the run's seed")
    parser.add_argument("--at", nargs="+", type=int, default=[0, 8, 40, 160, 480])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", default="noise_scale.json")
    args = parser.parse_args()
    from advisor.probes.torch_loop import configure

    configure(args.threads)
    rows = repeat(args) if args.mode == "repeat" else growth(args)
    with open(args.out, "w") as fh:
        json.dump({"args": vars(args), "rows": rows}, fh, indent=1)


if __name__ == "__main__":
    main()
