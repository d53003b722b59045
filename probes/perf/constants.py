"""Constants of the cross-device performance model, each with its source.

Every number here is either derived from a cited public figure (vendor peak specs, published
training throughputs) or is a stated prior with a wide interval. docs/calibration.md lists the
same table with the derivations; keep the two in step. The GPU compute and memory
efficiencies and the straggler coefficient are fitted to published GPU throughputs
(benchmarks/cross_gpu.py); nothing here was fitted to the published cloud measurements the
advisor is judged against.
"""

from __future__ import annotations

from dataclasses import dataclass

# --- FLOPs of the calibration model -------------------------------------------------------
# ResNet-50 at 224x224: 3.8-4.1 G multiply-adds per forward pass (He et al. 2015, table 1;
# v1.5 ~4.1 G). One multiply-add = 2 FLOPs; a training step (forward + backward) ~= 3x the
# forward pass (backward computes two gradients per layer).
RESNET50_V1_TRAIN_FLOPS = 3 * 2 * 3.86e9  # ~23.2 GFLOP per image
RESNET50_V15_TRAIN_FLOPS = 3 * 2 * 4.1e9  # ~24.6 GFLOP per image


@dataclass(frozen=True)
class GenerationProfile:
    """What we assume about one accelerator generation.

    ``efficiency`` is the achieved fraction of the peak of ``precision`` ("fp32", "tf32",
    "bf16") when a GPU is saturated by a standard convolutional training step, derived from a
    published throughput (``source``). ``cuda_init_s`` is the extra initialisation on the
    device (context creation, library load), ``warmup_s`` the extra first-iteration time
    (cuBLAS/cuDNN handles, kernel loading or compilation); both are priors with
    ``prior_factor`` as their multiplicative uncertainty. ``model_factor`` is the
    multiplicative uncertainty of the steady-iteration prediction.
    """

    name: str
    efficiency: float
    precision: str
    source: str
    cuda_init_s: float
    warmup_s: float
    prior_factor: float
    model_factor: float
    dispatch_scale: float = 1.0  # host launch overhead relative to eager PyTorch on a GPU

    def __post_init__(self) -> None:
        if not 0 < self.efficiency <= 1:
            raise ValueError(f"efficiency must be in (0, 1], but got {self.efficiency}")
        if self.precision not in ("fp32", "tf32", "bf16"):
            raise ValueError(f"precision must be fp32/tf32/bf16, but got {self.precision!r}")
        if self.prior_factor < 1 or self.model_factor < 1:
            raise ValueError(
                f"factors must be >= 1, but got prior_factor={self.prior_factor}, "
                f"model_factor={self.model_factor}"
            )


_TF_BENCH = "tensorflow.org/performance/benchmarks (2017), ResNet-50 synthetic data, 1 GPU"
_LAMBDA = (
    "fitted: benchmarks/cross_gpu.py on Lambda's PyTorch ResNet-50 fp32/TF32 throughputs "
    "(shared/data/gpu-throughput), the fit sits at the 0.8 cap"
)

# Fitted by benchmarks/cross_gpu.py (docs/calibration.md, docs/benchmarks.md) with the per-kernel
# roofline of perf.accel (t = compute / efficiency + memory / MEMORY_EFFICIENCY + input) on 13
# published 1-GPU ResNet-50 throughputs: the least-squares fit pushes the compute efficiency to
# its prior upper bound (0.8) for both precision classes and puts the time in memory traffic;
# leave-one-GPU-out median |error| 9.3 %, worst 17.7 %.
FITTED_COMPUTE_EFFICIENCY = {"fp32": 0.8, "tf32": 0.8}
FITTED_MODEL_FACTOR = 1.5  # 2.3x the worst leave-one-out log error; other workloads unvalidated

GENERATIONS: dict[str, GenerationProfile] = {
    # K80 (GK210): 52 img/s = 19.2 ms; with this model's memory term (582 MB / (0.487 x 240
    # GB/s) = 5.0 ms) and input (0.1 ms), compute is 14.1 ms: 23.2 GFLOP / 14.1 ms = 1.6 of
    # 4.37 TFLOP/s. Current PyTorch wheels ship no sm_37 code: the first iteration may
    # JIT-compile PTX, hence the long and very uncertain warm-up.
    "kepler": GenerationProfile(
        "kepler", 0.37, "fp32", f"{_TF_BENCH}: K80 52 img/s", 2.0, 5.0, 4.0, 2.0
    ),
    # No citable training figure: midway between Kepler and Pascal, flagged by a wider factor.
    "maxwell": GenerationProfile(
        "maxwell", 0.55, "fp32", "prior: between Kepler and Pascal", 2.0, 3.0, 3.0, 2.5
    ),
    # P100 SXM2: 219 img/s = 4.57 ms; memory 582 MB / (0.487 x 732 GB/s) = 1.63 ms, input
    # 0.1 ms, compute 2.83 ms: 23.2 GFLOP / 2.83 ms = 8.2 of 10.6 TFLOP/s (at the 0.8 cap).
    "pascal": GenerationProfile(
        "pascal", 0.76, "fp32", f"{_TF_BENCH}: P100 219 img/s", 1.5, 2.0, 2.5, 2.0
    ),
    "volta": GenerationProfile(
        "volta",
        FITTED_COMPUTE_EFFICIENCY["fp32"],
        "fp32",
        _LAMBDA,
        1.5,
        2.0,
        2.5,
        FITTED_MODEL_FACTOR,
    ),
    "turing": GenerationProfile(
        "turing",
        FITTED_COMPUTE_EFFICIENCY["fp32"],
        "fp32",
        _LAMBDA,
        1.5,
        2.0,
        2.5,
        FITTED_MODEL_FACTOR,
    ),
    # cuDNN convolutions use TF32 by default in PyTorch on Ampere and later.
    "ampere": GenerationProfile(
        "ampere",
        FITTED_COMPUTE_EFFICIENCY["tf32"],
        "tf32",
        _LAMBDA,
        1.5,
        2.0,
        2.5,
        FITTED_MODEL_FACTOR,
    ),
    "ada": GenerationProfile(
        "ada",
        FITTED_COMPUTE_EFFICIENCY["tf32"],
        "tf32",
        _LAMBDA,
        1.5,
        2.0,
        2.5,
        FITTED_MODEL_FACTOR,
    ),
    "hopper": GenerationProfile(
        "hopper",
        FITTED_COMPUTE_EFFICIENCY["tf32"],
        "tf32",
        _LAMBDA,
        1.5,
        2.0,
        2.5,
        FITTED_MODEL_FACTOR,
    ),
    "blackwell": GenerationProfile(
        "blackwell",
        FITTED_COMPUTE_EFFICIENCY["tf32"],
        "tf32",
        "prior: the Ampere-Hopper fitted value (no Blackwell data)",
        1.5,
        2.0,
        2.5,
        3.0,
    ),
    # TPUs: bf16 peak; XLA compiles the graph on the first step (tens of seconds to minutes,
    # PyTorch/XLA and Cloud TPU docs); after that, dispatch is of a compiled graph.
    "tpu": GenerationProfile(
        "tpu", 0.35, "bf16", "prior: no citable figure", 5.0, 60.0, 4.0, 3.0, dispatch_scale=0.2
    ),
}
UNKNOWN_GENERATION = GenerationProfile(
    "unknown", 0.3, "fp32", "prior: unknown accelerator", 2.0, 3.0, 4.0, 3.0
)

# Accelerator names -> generation, for catalogs whose AcceleratorSpec.generation is free text.
NAME_TO_GENERATION: dict[str, str] = {
    "k80": "kepler",
    "k520": "kepler",
    "m60": "maxwell",
    "p100": "pascal",
    "p4": "pascal",
    "p40": "pascal",
    "v100": "volta",
    "t4": "turing",
    "a100": "ampere",
    "a10g": "ampere",
    "a10": "ampere",
    "a30": "ampere",
    "a40": "ampere",
    "l4": "ada",
    "l40s": "ada",
    "l40": "ada",
    "h100": "hopper",
    "h200": "hopper",
    "gh200": "hopper",
    "b200": "blackwell",
    "gb200": "blackwell",
}

# --- Host side (priors) ----------------------------------------------------------------
# Eager PyTorch dispatches every op from Python: NVIDIA's README above shows ResNet-50 FP32
# inference at batch 1-4 taking 10.4 ms on V100 and 10.7 ms on T4 alike (host-bound, not
# GPU-bound), i.e. ~60 us per forward op (~175 ops) including the synchronisation.
DISPATCH_S_PER_OP = 30e-6  # prior per op of a training step (launch + dispatcher), x/2
DEFAULT_OPS_PER_ITERATION = 100  # prior for a small CNN: ~15 fwd, ~30 bwd, optimizer, loss
DISPATCH_FACTOR = 2.0
INPUT_FACTOR = 3.0  # uncertainty of the host input pipeline when it is the HOST_S_PER_SAMPLE prior
HOST_S_PER_SAMPLE = 5e-6  # DataLoader index + collate per sample (prior), x/3
H2D_BYTES_PER_S = 6e9  # pageable host->device copy on PCIe 3 x16 (~half of 15.75 GB/s)
# Memory traffic: each weight is read in forward and backward and the optimizer reads and
# writes weights, gradients and momentum: ~7 fp32 accesses = 28 bytes per parameter.
WEIGHT_TRAFFIC_BYTES_PER_PARAM = 28.0
# Activations are written in forward, read in backward, gradients written and read: ~4x the
# activation bytes; without a measured activation size, assume 20 FLOP per byte moved.
ACTIVATION_TRAFFIC_MULTIPLIER = 4.0
PRIOR_FLOPS_PER_BYTE = 20.0
# Achieved fraction of vendor peak memory bandwidth for a training step's traffic, fitted with
# the compute efficiency above (benchmarks/cross_gpu.py); it absorbs the traffic multiplier's
# error, so read it as "bytes moved per activation byte / 4 / bandwidth", not as STREAM.
MEMORY_EFFICIENCY = 0.487
FORWARD_FLOP_SHARE = 1.0 / 3.0  # validation = forward only

# --- Multi-device (data parallel) ------------------------------------------------------
LINK_EFFICIENCY = {"pcie": 0.5, "nvlink": 0.8, "ici": 0.7}  # achieved / nominal per link
HOP_LATENCY_S = {"pcie": 20e-6, "nvlink": 8e-6, "ici": 10e-6}  # per ring step (prior)
DDP_OVERHEAD_S = 0.5e-3  # DDP hooks and bucket copies per iteration (prior)
# Per-replica jitter; the step waits for the slowest of n. Fitted to the 2/4/8-GPU scaling of
# the same data (benchmarks/cross_gpu.py; leave-one-size-out median |error| 3.5 %).
STRAGGLER_CV = 0.015
DP_DISPATCH_SERIAL = 0.5  # single-process DataParallel: share of per-replica dispatch not hidden
NCCL_INIT_S = 2.0  # multi-GPU: process group + communicator set-up (prior, x/2.5)
NCCL_INIT_PER_GPU_S = 0.25

# --- CPU targets ------------------------------------------------------------------------
CPU_PARALLEL_FRACTION = 0.9  # Amdahl prior for intra-op parallel training steps
CPU_PARALLEL_FRACTION_RANGE = (0.75, 0.97)
CPU_FIXED_S = 2e-3  # per-iteration fixed host overhead on a CPU (prior), capped at half t2
CPU_ACHIEVED_FLOPS_PER_CORE = 10e9  # only when a probe has no FLOP count (prior, x/3)

# --- Uncertainty (multiplicative factors: interval = [value / f, value * f]) -------------
SAME_CPU_FACTOR = 1.25  # local machine, other batch size or thread count
OTHER_CPU_FACTOR = 1.6
NO_FLOPS_FACTOR = 3.0  # FLOPs estimated from the CPU time instead of counted
