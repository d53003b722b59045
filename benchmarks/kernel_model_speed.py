"""How long ``predict_trace`` takes for a 1,000-operator trace on 100 catalog machines.

The trace: 1,000 distinct operators drawn with a fixed seed over every kind and phase (the
shapes of real steps repeat, so a real 1,000-operator trace is no harder). The machines: the
first 100 GPU machines of the current catalog snapshot (one or several GPUs each; the model
predicts per distinct GPU). Timed in this process after one warm-up call; the cold first call
(reading the shipped parameters) is reported apart.
"""

from __future__ import annotations

import statistics
import time

import numpy as np
from advisor.probes.operators.types import Operator, OperatorTrace

KINDS = ("linear", "bmm", "conv", "elementwise", "layernorm", "softmax", "reduction",
         "embedding", "copy", "optimizer", "other")  # fmt: skip


def synthetic_trace(n: int = 1000, seed: int = 0) -> OperatorTrace:
    """``n`` distinct operators of every kind, shapes drawn log-uniformly."""
    rng = np.random.default_rng(seed)

    def size(lo: int, hi: int) -> int:
        return int(np.exp(rng.uniform(np.log(lo), np.log(hi))))

    ops = []
    for i in range(n):
        kind = KINDS[i % len(KINDS)]
        phase = ("forward", "backward")[i % 2] if kind != "optimizer" else "optimizer"
        if kind in ("linear", "bmm"):
            dims = {"B": size(1, 64) if kind == "bmm" else 1, "M": size(16, 16384),
                    "N": size(16, 16384), "K": size(16, 16384)}  # fmt: skip
        elif kind == "conv":
            dims = {"B": size(1, 256), "Cin": size(3, 1024), "Cout": size(16, 1024),
                    "kernel": int(rng.choice([1, 3, 5, 7])), "H": size(7, 224), "W": 56,
                    "stride": int(rng.choice([1, 2])), "padding": 1, "groups": 1}  # fmt: skip
            dims["W"] = dims["H"]
        elif kind in ("layernorm", "softmax"):
            dims = {"B": size(1, 65536), "H": size(16, 16384)}
        else:
            dims = {"numel": size(1, 10**9)}
        op = "weight_grad" if kind == "conv" and phase == "backward" else ""
        ops.append(Operator(kind, phase, f"aten.synthetic{i}", dims, op=op, count=1 + i % 5))
    return OperatorTrace("synthetic", "torch", 1, tuple(ops), executed=False)


def machines(n: int = 100) -> list[str]:
    """The accelerators of the first ``n`` GPU machines of the catalog (repeats kept)."""
    from advisor.providers.catalog import load

    from advisor.prediction.kernels import catalog_gpus

    gpus = catalog_gpus()
    return [i.accelerator for i in load().instances if i.accelerator in gpus][:n]


def time_prediction(repeats: int = 7) -> dict[str, float]:
    """Cold first call and the median of ``repeats`` warm calls (seconds)."""
    from advisor.prediction.kernels import predict_trace

    trace, targets = synthetic_trace(), machines()
    start = time.perf_counter()
    predict_trace(trace, targets)
    cold = time.perf_counter() - start
    warm = []
    for _ in range(repeats):
        start = time.perf_counter()
        predict_trace(trace, targets)
        warm.append(time.perf_counter() - start)
    return {"operators": len(trace.operators), "machines": len(targets),
            "gpus": len(set(targets)), "cold_s": cold, "warm_s": statistics.median(warm),
            "warm_max_s": max(warm)}  # fmt: skip
