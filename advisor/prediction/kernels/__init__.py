"""Per-operator GPU latency model: device time of a traced step on any catalog GPU.

Fitted on measured float32 kernel latencies of five GPUs (``fit.py``, data in
``benchmarks/data/gpu-kernels``); a GPU the tables never measured is predicted from its spec
sheet alone with a wider interval. See ``docs/kernel-model.md``.

    from advisor.prediction.kernels import predict_trace
    steps = predict_trace(trace, ["H100", "L4"])   # {gpu: StepPrediction}
"""

from advisor.prediction.kernels.gpus import GpuSpec, catalog_gpus, gpu_spec
from advisor.prediction.kernels.model import KernelModel, load_model
from advisor.prediction.kernels.predict import (
    OperatorTimes,
    StepPrediction,
    operator_times,
    predict_operator,
    predict_trace,
    predict_trace_times,
)

__all__ = [
    "GpuSpec",
    "KernelModel",
    "OperatorTimes",
    "StepPrediction",
    "catalog_gpus",
    "gpu_spec",
    "load_model",
    "operator_times",
    "predict_operator",
    "predict_trace",
    "predict_trace_times",
]
