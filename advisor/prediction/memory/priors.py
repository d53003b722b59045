"""The priors of the memory model (issue #34): what a GPU holds that no trace can see.

Neither term is measurable without the GPU; each is a prior with a stated range (GiB or a
fraction), per framework and GPU generation, and the memory model marks it ``prior=True``:

- ``framework_fixed``: the CUDA context (with CUDA >= 11.7's lazy module loading, the
  default since PyTorch 1.13: a few hundred MiB, larger on GPUs with more SMs and on newer
  architectures) and the libraries' handles, outside PyTorch's caching allocator (cuBLAS's
  workspaces are inside it: ``cublas_workspace_mib``, modelled from PyTorch's source and
  measured on an H200). TensorFlow loads its kernels eagerly and its BFC allocator keeps
  a pool: its range starts higher. ``torch.cuda.memory_reserved()`` does not count the
  context, ``nvidia-smi`` does: the figure to check is the GPU's memory minus this term.
- ``allocator_reserve``: the caching allocator's rounding (512-byte blocks, 2 MiB / 20 MiB
  segments) and fragmentation, reserved minus allocated bytes at the peak, as a fraction of
  the step's tensor peak.

``benchmarks/gpu_check.py`` records ``max_memory_allocated`` and ``max_memory_reserved`` on a
GPU beside the prediction: the measured figures these priors stand in for.
"""

from __future__ import annotations

from typing import Any

# (value, low, high) GiB of the context + library handles, by framework and generation. The
# PyTorch ranges hold the read-outs of benchmarks/data/gpu-memory (a process's memory outside
# PyTorch's caching allocator, from published out-of-memory messages: T4 0.10-0.14, A10 0.22,
# L4 0.23, A100 0.4-0.5, L40S 0.49, RTX 4090 0.49, H200 0.65, B200 0.69 GiB); the values
# remain priors (no GPU of this project measured them).
FIXED_GIB: dict[str, dict[str, tuple[float, float, float]]] = {
    "torch": {
        "Pascal": (0.35, 0.25, 0.6),
        "Volta": (0.4, 0.3, 0.7),
        "Turing": (0.3, 0.1, 0.6),
        "Ampere": (0.45, 0.2, 0.8),
        "Ada Lovelace": (0.45, 0.2, 0.8),
        "Hopper": (0.65, 0.4, 1.0),
        "Blackwell": (0.7, 0.4, 1.2),
    },
    "keras": {
        "Pascal": (0.5, 0.3, 1.0),
        "Volta": (0.6, 0.4, 1.2),
        "Turing": (0.5, 0.3, 1.0),
        "Ampere": (0.7, 0.4, 1.4),
        "Ada Lovelace": (0.7, 0.4, 1.4),
        "Hopper": (0.8, 0.5, 1.6),
        "Blackwell": (0.9, 0.5, 1.8),
    },
}
# The memory CUDA reports per catalog GPU (MiB: ``torch.cuda.get_device_properties().total_memory``,
# PyTorch's "total capacity" in its out-of-memory message, or deviceQuery's global memory):
# published read-outs, each row's source in benchmarks/data/gpu-memory/usable.csv. The CUDA
# context comes on top of what a step allocates (``FIXED_GIB``). Where two drivers disagree
# the smaller figure is kept (a larger one would let a step "fit" that does not).
USABLE_MIB: dict[str, tuple[int, str]] = {
    "K80": (11438, "PyTorch 'total capacity 11.17 GiB' per GK210 die, Colab and Azure NC"),
    "P4": (7608, "PyTorch 'total capacity 7.43 GiB' on Colab (board not named; nvidia-smi 7611)"),
    "P100": (16282, "PyTorch 'total capacity 15.90 GiB' on Colab (nvidia-smi 16280)"),
    "V100": (16160, "cutorch total 16945512448 B, nvidia-smi 16160 MiB (V100-SXM2 16 GB)"),
    "V100-32GB": (32502, "PyTorch 'total capacity 31.74 GiB' (V100-SXM2 32 GB)"),
    "V100-PCIe-32GB": (32480, "nvidia-smi 32480 MiB on driver 410 (then equal to CUDA's)"),
    "T4": (15104, "PyTorch 'total capacity 14.75 GiB' on Colab (nvidia-smi 15360: ECC on)"),
    "A10": (22518, "PyTorch 2.0.1 'total capacity of 21.99 GiB' (nvidia-smi 23028: ECC on)"),
    "A10G": (22518, "the A10's 21.99 GiB (same 24 GB GDDR6 board; 22.49 GiB on a 2022 driver)"),
    "L4": (22559, "PyTorch 'total capacity of 22.03 GiB' (nvidia-smi 23034: ECC on)"),
    "L40S": (45599, "PyTorch 'total capacity of 44.53 GiB' (nvidia-smi 46068: ECC on)"),
    "A100-40GB": (40339, "deviceQuery 40339 MBytes, A100-SXM4-40GB, CUDA 12.2"),
    "A100-40GB-PCIe": (40339, "the SXM4 board's 40339 MiB (same 40 GB HBM2)"),
    "A100-80GB": (81152, "PyTorch 'total capacity 79.25 GiB' (A100-SXM4-80GB)"),
    "A100-80GB-PCIe": (81152, "the SXM4 board's 79.25 GiB (same 80 GB HBM2e)"),
    "H100": (81009, "PyTorch 'total capacity of 79.11 GiB' (H100 80GB HBM3)"),
    "H100-NVL": (95330, "Linux DRM dedicated total 99961274368 B, driver 570 (nvidia-smi 95830)"),
    "H200": (143155, "PyTorch 'total capacity of 139.80 GiB' (nvidia-smi 143771)"),
    "B200": (182630, "deviceQuery and PyTorch 'total capacity of 178.35 GiB' (nvidia-smi 183359)"),
    "RTX4090": (24207, "PyTorch 'total capacity 23.64 GiB' (nvidia-smi 24564)"),
}
# GDDR boards run with ECC on in the clouds, which keeps 1/16 of the memory for check bits.
ECC_GDDR = frozenset({"K80", "P4", "T4", "A10", "A10G", "L4", "L40S"})
RESERVED_SHARE = {
    "ecc_gddr": (1 / 16, "ECC on GDDR memory keeps 1/16 for check bits (prior)"),
    "other": (0.02, "what the driver and firmware keep on an HBM board (prior)"),
}

# Any generation or framework not listed: the widest range of the table.
GENERIC_FIXED_GIB = (0.6, 0.25, 1.8)

# Reserved minus allocated at the peak, as a fraction of the tensor peak (value, low, high).
RESERVE_FRACTION = {"torch": (0.05, 0.0, 0.2), "keras": (0.1, 0.0, 0.3)}
GENERIC_RESERVE_FRACTION = (0.08, 0.0, 0.3)


def fixed_gib(framework: str, generation: str | None) -> tuple[tuple[float, float, float], str]:
    """The fixed-cost prior in GiB and the words saying which row it is."""
    row = FIXED_GIB.get(framework, {}).get(generation or "")
    if row is None:
        return GENERIC_FIXED_GIB, f"prior: CUDA context + library handles, {framework}, any GPU"
    return row, f"prior: CUDA context + library handles, {framework} on {generation}"


# PyTorch's cuBLAS workspace (issue #45): one per (handle, stream), allocated through the caching
# allocator, so it is in the step's allocated peak. Its size is PyTorch's default
# (aten/src/ATen/cuda/CublasHandlePool.cpp, ``parseChosenWorkspaceSize``): 32 MiB on sm_90
# (Hopper), else 8 MiB + 128 KiB (":4096:2:16:8"). A training step holds two: the forward's
# handle on the calling thread and the backward's on autograd's device thread; cuBLASLt adds
# its 1 MiB (``CUBLASLT_WORKSPACE_SIZE``'s default). Measured: 65.0 MiB above the traced tensors
# on an H200 (torch 2.11) for every step that multiplies matrices (docs/benchmarks.md, "Plans'
# memory against the step that runs on a GPU"). Low: one workspace (a PyTorch that allocates
# it per call rather than keeping it per handle).
CUBLAS_WORKSPACE_MIB = {"Hopper": 32.0}
CUBLAS_WORKSPACE_OTHER_MIB = 8.125
CUBLASLT_WORKSPACE_MIB = 1.0


def cublas_workspace_mib(generation: str | None) -> tuple[tuple[float, float, float], str]:
    """The cuBLAS workspaces a training step's allocated peak holds (MiB: value, low, high)
    on ``generation``, and the words saying where they come from."""
    per_handle = CUBLAS_WORKSPACE_MIB.get(generation or "", CUBLAS_WORKSPACE_OTHER_MIB)
    value = 2 * per_handle + CUBLASLT_WORKSPACE_MIB
    return (value, per_handle, value), (
        f"modelled: PyTorch's cuBLAS workspace, {per_handle:g} MiB per handle on "
        f"{generation or 'this GPU'}, forward and backward threads, plus cuBLASLt's 1 MiB "
        "(CublasHandlePool.cpp; 65.0 MiB measured on an H200)"
    )


def reserve_fraction(framework: str) -> tuple[float, float, float]:
    return RESERVE_FRACTION.get(framework, GENERIC_RESERVE_FRACTION)


# NCCL's own buffers on each GPU of a multi-GPU step, outside PyTorch's caching allocator (GiB:
# value, low, high). NCCL's documentation (Environment Variables, NCCL_BUFFSIZE): 4 MiB per
# buffer by default, one per channel and peer in each direction; with the 8-32 channels NCCL
# opens on NVLink machines that is 64 MiB to about 0.5 GiB; plus its proxy and work FIFOs.
COLLECTIVE_GIB = (0.25, 0.06, 0.75)


def collective_gib() -> tuple[tuple[float, float, float], str]:
    """The collective library's buffers per GPU (a prior) and the words saying so."""
    return COLLECTIVE_GIB, (
        "prior: NCCL's communication buffers (NCCL_BUFFSIZE 4 MiB per channel and peer), "
        "outside the caching allocator"
    )


# The trace's own largest under-prediction of a step's allocated peak, per framework, as a
# share of the predicted tensors (issue #45: the fit keeps the model's measured error as a
# margin); 0 where no under-prediction was measured. PyTorch: measured on an H200 (2026-11-28,
# docs/data/h200-2026-11-28/ft_rescored.json) by benchmarks/fine_tuning.py --device cuda, the
# fit's half: Llama-3.2-1B's widths at 4 blocks, full fine-tuning in float32 at batch 8 and
# 512 tokens, 16,316 MiB measured against 15,326 predicted (measured / predicted - 1 = 6.5 %;
# not explained: its bf16 step is exact). Checked on the other half, plan_conformance.py's
# 150 GPU rows: none under its upper estimate by more than 2.3 % but the convolution steps
# whose cuDNN workspace took free memory (docs/benchmarks.md).
TRACE_MARGIN = {"torch": 0.065, "keras": 0.0}
TRACE_MARGIN_SOURCE = {
    "torch": "benchmarks/fine_tuning.py on an H200: Llama-3.2-1B full fp32, batch 8",
}


def trace_margin(framework: str) -> tuple[float, str]:
    """The margin's share of the traced tensors for ``framework`` and its source."""
    value = TRACE_MARGIN.get(framework, max(TRACE_MARGIN.values()))
    where = TRACE_MARGIN_SOURCE.get(framework, "benchmarks/plan_conformance.py")
    return value, (
        f"measured: the trace's largest under-prediction, {value:.1%} of the tensors ({where})"
    )


def usable_gib(spec: Any) -> tuple[float, str]:
    """The GPU memory a program can allocate on ``spec``'s board (GiB) and its source: the
    total the driver reports where a read-out is known (``USABLE_MIB``), else the board's
    memory less what the driver keeps (``RESERVED_SHARE`` by memory type, a prior)."""
    name = str(getattr(spec, "name", ""))
    nominal = float(spec.memory_gib)
    found = USABLE_MIB.get(name)
    if found is not None:
        mib, source = found
        return mib / 1024, f"read-out: the driver reports {mib:,} MiB ({source})"
    share, why = RESERVED_SHARE["ecc_gddr" if name in ECC_GDDR else "other"]
    return nominal * (1 - share), f"prior: {nominal:g} GiB less {share:.1%} ({why})"


# A CPU machine's RAM holds, beside the step's tensors (issue #45, stop 65; measured on this
# project's 2-core machine, two threads, `python benchmarks/host_heap.py`, docs/benchmarks.md
# "A CPU step's resident memory"):
# - the process before its first step: the interpreter, PyTorch and the advisor, 321 MiB for a
#   small model (GPT-2 mini); up to 594 MiB with fcn's data at batch 2048 (MiB: value, low,
#   high);
# - the heap's holes: advisor.train keeps freed memory in glibc's heap for speed
#   (``advisor.probes.allocator``), and the resident memory grew by 1.42-1.93x the step's
#   tensors (median 1.53, 7 cases of fcn, simple-cnn and GPT-2 mini); with glibc's defaults
#   1.03-1.32x. As the extra over the tensors: (value, low, high). Not measured with more
#   threads, which may keep more (glibc's arenas are per thread).
PROCESS_BASE_MIB = (321.0, 321.0, 594.0)
HEAP_EXTRA = (0.53, 0.42, 0.93)
