"""Constants of the cross-device performance model, each with its source.

Every number here is either derived from a cited public figure (vendor peak specs, published
training throughputs) or is a stated prior with a wide interval. docs/calibration.md lists the
same table with the derivations; keep the two in step. A GPU's steady step is the GPU kernel
model's (``advisor.prediction.kernels``, fitted on measured kernel latencies, docs/kernel-model.md);
the constants here are the host terms, the multi-GPU terms, the start-up priors, the roofline
of TPUs and the CPU model. The straggler coefficient is fitted to published GPU throughputs
(benchmarks/cross_gpu.py); nothing here was fitted to the published cloud measurements the
advisor is judged against.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class GenerationProfile:
    """What we assume about one accelerator generation.

    GPUs: the steady step is the GPU kernel model's device time of the traced step
    (``advisor.prediction.kernels``), so a GPU generation only carries its start-up priors:
    ``cuda_init_s`` (CUDA context creation, library load) and ``warmup_s`` (the extra first
    iteration: cuBLAS/cuDNN handles and algorithm choice, kernel loading or JIT), with
    ``prior_factor`` as their multiplicative uncertainty. Measured start-up on the device class
    (remote probes, kept in the calibration ledger) replaces them (``timing.startup``).

    Accelerators the kernel model does not cover (TPUs; any accelerator without kernel-model
    figures) keep a roofline over the trace's FLOPs and bytes: ``efficiency`` is the achieved
    fraction of the peak of ``precision`` ("fp32", "tf32", "bf16"), ``model_factor`` the
    multiplicative uncertainty of that step, ``dispatch_scale`` the host launch cost relative to
    eager PyTorch on a GPU. ``efficiency`` is None for GPU generations.
    """

    name: str
    cuda_init_s: float
    warmup_s: float
    prior_factor: float
    source: str = ""
    efficiency: float | None = None
    precision: str = "fp32"
    model_factor: float = 1.0
    dispatch_scale: float = 1.0
    # The device time's scale on this generation, fitted on published whole-model training
    # rows (``benchmarks/multi_gpu.py``; 1.0: the kernel model as it stands).
    device_scale: float = 1.0
    device_scale_source: str = ""
    # A whole-model profile (Kepler): the device time is the roofline of the trace's FLOPs at
    # ``efficiency`` x ``sustained_clock`` x the spec's fp32 peak plus its bytes at
    # ``memory_efficiency`` x the spec's bandwidth, both fitted on published whole-model rows
    # (``benchmarks/multi_gpu.py``), instead of the kernel model's spec extrapolation.
    # ``efficiency`` may pass 1 there: the trace counts direct-convolution FLOPs, and cuDNN's
    # Winograd/FFT algorithms do fewer. ``sustained_clock``: the share of the boost-clock peak
    # held under a long dense load (a prior).
    whole_model: bool = False
    memory_efficiency: float | None = None
    sustained_clock: float = 1.0

    def __post_init__(self) -> None:
        top = 3.0 if self.whole_model else 1.0
        if self.efficiency is not None and not 0 < self.efficiency <= top:
            raise ValueError(f"efficiency must be in (0, {top:g}], but got {self.efficiency}")
        if self.whole_model and (self.efficiency is None or self.memory_efficiency is None):
            raise ValueError("a whole-model profile needs efficiency and memory_efficiency")
        if self.memory_efficiency is not None and not 0 < self.memory_efficiency <= 1:
            raise ValueError(f"memory_efficiency must be in (0, 1], got {self.memory_efficiency}")
        if not 0 < self.sustained_clock <= 1:
            raise ValueError(f"sustained_clock must be in (0, 1], got {self.sustained_clock}")
        if self.precision not in ("fp32", "tf32", "bf16"):
            raise ValueError(f"precision must be fp32/tf32/bf16, but got {self.precision!r}")
        if self.prior_factor < 1 or self.model_factor < 1:
            raise ValueError(
                f"factors must be >= 1, but got prior_factor={self.prior_factor}, "
                f"model_factor={self.model_factor}"
            )
        if min(self.cuda_init_s, self.warmup_s) < 0:
            raise ValueError(f"start-up priors must be >= 0, got {self}")


_START = "prior: CUDA context + library load, first-iteration warm-up (docs/calibration.md)"

GENERATIONS: dict[str, GenerationProfile] = {
    # Current PyTorch wheels ship no sm_37 code: the first iteration may JIT-compile PTX,
    # hence the long and very uncertain warm-up.
    "kepler": GenerationProfile(
        "kepler",
        2.0,
        5.0,
        4.0,
        f"{_START}; Kepler JIT",
        efficiency=2.25,
        model_factor=2.0,
        device_scale_source="fitted on TensorFlow's 2017 K80 1-GPU rows (ResNet-50, VGG-16, "
        "AlexNet; benchmarks/multi_gpu.py): in-sample 5 %, leave one model out 57 %, from the "
        "P100's shares 34 % median |error|; x/2 a prior of that size",
        whole_model=True,
        memory_efficiency=0.226,
        sustained_clock=560.0 / 875.0,
    ),
    "maxwell": GenerationProfile("maxwell", 2.0, 3.0, 3.0, _START),
    "pascal": GenerationProfile("pascal", 1.5, 2.0, 2.5, _START),
    "volta": GenerationProfile("volta", 1.5, 2.0, 2.5, _START),
    "turing": GenerationProfile("turing", 1.5, 2.0, 2.5, _START),
    "ampere": GenerationProfile("ampere", 1.5, 2.0, 2.5, _START),
    "ada": GenerationProfile("ada", 1.5, 2.0, 2.5, _START),
    "hopper": GenerationProfile("hopper", 1.5, 2.0, 2.5, _START),
    "blackwell": GenerationProfile("blackwell", 1.5, 2.0, 2.5, _START),
    # TPUs: bf16 peak; XLA compiles the graph on the first step (tens of seconds to minutes,
    # PyTorch/XLA and Cloud TPU docs); after that, dispatch is of a compiled graph. Advisor
    # cannot train there: TPU rows are predicted only (issue #27).
    # device_scale: fitted on the Flax authors' ResNet-50 run on a TPU v3-8 (8,087 images/s,
    # benchmarks/data/tpu-results): the roofline sums the trace's FLOPs at 0.35 of the bf16 peak
    # and its eager per-kernel bytes, which a fused bfloat16 XLA program does not move. Held
    # out (benchmarks/tpu_results.py): v2-32 +24 %, v3-32 +64 % (four hosts, 64 images a
    # chip), the v3-8 / 8x V100 ratio 3.4 against 3.0: within the x/2 model factor.
    "tpu": GenerationProfile(
        "tpu",
        5.0,
        60.0,
        4.0,
        "prior: no citable figure",
        0.35,
        "bf16",
        2.0,
        dispatch_scale=0.2,
        device_scale=0.2,
        device_scale_source="fitted: Flax ResNet-50 on TPU v3-8 "
        "(benchmarks/tpu_results.py; held out v2-32 +24 %, v3-32 +64 %)",
    ),
}
UNKNOWN_GENERATION = GenerationProfile(
    "unknown", 2.0, 3.0, 4.0, "prior: unknown accelerator", 0.3, "fp32", 3.0
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

# --- Host side ------------------------------------------------------------------------
# Eager PyTorch launches every kernel from the host; the device runs asynchronously, so a step
# takes at least its launches' host time. NVIDIA's DeepLearningExamples README for PyTorch
# ResNet-50 v1.5 gives FP32 inference at batch 1 as 10.4 ms on a V100 and 10.7 ms on a T4 alike:
# host-bound, not GPU-bound. That forward pass launches 174 kernels (this project's operator
# trace of ResNet-50: 229 forward launches in training mode, less the 53 batch-norm counter
# increments and the 2 loss kernels that inference does not run), so 10.4 ms / 174 = 60 us per
# launch, Python, dispatcher, launch and the batch's synchronisation included. Applied to every
# launch of a training step (backward and optimizer launches come from C++, without Python, so
# this is likely high for them): a prior, x/2, until benchmarks/gpu_check.py measures it.
DISPATCH_S_PER_LAUNCH = 10.4e-3 / 174
DISPATCH_FACTOR = 2.0
DEFAULT_LAUNCHES_PER_STEP = 100  # prior, only without an operator trace: a small CNN's step
INPUT_FACTOR = 3.0  # uncertainty of the host input pipeline when it is the HOST_S_PER_SAMPLE prior
HOST_S_PER_SAMPLE = 5e-6  # DataLoader index + collate per sample (prior), x/3
H2D_BYTES_PER_S = 6e9  # pageable host->device copy on PCIe 3 x16 (~half of 15.75 GB/s)
COMMUNICATION_FACTOR = 1.5  # all-reduce and replica terms (priors and one fitted CV), x/1.5

# --- Roofline (TPUs and accelerators without kernel-model figures) ---------------------
# t = FLOPs / (peak x efficiency) + bytes / (bandwidth x ROOFLINE_MEMORY_EFFICIENCY), with the
# trace's FLOPs and minimum bytes per kernel; without a trace, the probe's counted FLOPs and
# 20 FLOP per byte moved. Both are priors (no TPU measurement here).
ROOFLINE_MEMORY_EFFICIENCY = 0.75
PRIOR_FLOPS_PER_BYTE = 20.0
FORWARD_FLOP_SHARE = 1.0 / 3.0  # validation = forward only, when there is no trace to split

# --- A model traced without a local timing (too big or too slow for this machine) -------
# The local probe would have measured the host's initialisation (imports, data, model build);
# without it: a prior, x/3. Its steady CPU step is the trace's FLOPs at this CPU's measured
# matrix-product rate (``probes.operators.local_feasibility``): a measured stand-in and a lower
# bound, used only for CPU targets (a GPU prediction never reads the CPU step).
UNTIMED_INIT_S = 30.0
UNTIMED_INIT_FACTOR = 3.0
UNTIMED_CPU_FACTOR = 3.0

# --- Multi-device (data parallel) ------------------------------------------------------
# Achieved large-message bus bandwidth of an all-reduce / the link's nominal bandwidth per
# direction (priors, x/1.5), checked on the published nccl-tests rows of
# benchmarks/data/nccl-allreduce/ (2x RTX 2080 Ti NVLink bridge: 21.4 of 25 GB/s = 0.86;
# 2x H100 PCIe NVLink bridge: 116 of 300 = 0.39; PCIe 3.0 x16: about 10-12 of 16).
LINK_EFFICIENCY = {"pcie": 0.6, "nvlink": 0.7, "ici": 0.7}
# One all-reduce's latency: base + per extra device (seconds). From the smallest messages of
# the published nccl-tests rows (benchmarks/data/nccl-allreduce/): 2 GPUs on an NVLink bridge
# 23 us (alpha of the alpha-beta fit), 8 PCIe GPUs 43 us, 2 GPUs behind one PCIe switch 26 us.
ALLREDUCE_LATENCY_S = {
    "pcie": (23e-6, 2.8e-6),
    "nvlink": (20e-6, 1.0e-6),
    "ici": (10e-6, 1.0e-6),  # prior: no published TPU all-reduce row here
}
# DDP's own cost per step and replica (hooks, bucket copies, the reducer): measured here with
# gloo at world size 1, so no collective or waiting enters (benchmarks/ddp_overhead.py: 0.74
# and 0.88 ms with 18 and 1 buckets, IQR 0.4-2.3 ms; no measurable cost per extra bucket).
DDP_OVERHEAD_S = 0.8e-3
# DDP's gradient buckets: the first 1 MiB, then 25 MiB each (PyTorch's defaults,
# torch.distributed._DEFAULT_FIRST_BUCKET_BYTES and bucket_cap_mb=25): one collective each.
DDP_FIRST_BUCKET_BYTES = 1024**2
DDP_BUCKET_BYTES = 25 * 1024**2
# DDP all-reduces a bucket as soon as its gradients are ready, during the backward pass: the
# share of the device step that hides communication (backward is about 2/3 of forward +
# backward; the first layers' bucket is ready only at its end). Prior, x/1.5.
DDP_OVERLAP_SHARE = 0.5
# Per-replica jitter; the step waits for the slowest of n. Fitted to the 2/4/8-GPU scaling of
# Lambda's PyTorch rows (benchmarks/multi_gpu.py, leave one machine size out: docs/benchmarks.md).
STRAGGLER_CV = 0.015  # (refitted in benchmarks/multi_gpu.py: 0.01, held-out errors not better)
# One process driving every replica (Keras MirroredStrategy, nn.DataParallel): the share of
# one replica's host work (launches, per-replica graph bookkeeping) added per extra replica,
# run in series on the one host thread. A prior: TensorFlow's 2017 K80/P100 1-8 GPU rows do not
# constrain it (their models are device-bound; benchmarks/multi_gpu.py fits 0 on them, with
# held-out errors no better than at this prior: docs/benchmarks.md).
SERIAL_REPLICA_SHARE = 0.5
# TensorFlow's graph executor launches kernels from C++ (no Python per op): its host cost per
# launch relative to eager PyTorch's 60 us. Prior, x/2 (DISPATCH_FACTOR).
GRAPH_DISPATCH_SCALE = 0.5
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
