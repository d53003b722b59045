"""The priors of the memory model (issue #34): what a GPU holds that no trace can see.

Neither term is measurable without the GPU; each is a prior with a stated range (GiB or a
fraction), per framework and GPU generation, and the memory model marks it ``prior=True``:

- ``framework_fixed``: the CUDA context (with CUDA >= 11.7's lazy module loading, the
  default since PyTorch 1.13: a few hundred MiB, larger on GPUs with more SMs and on newer
  architectures), cuBLAS's workspace (4 MiB per handle before Hopper, 32 MiB on Hopper and
  later) and cuDNN's handle. TensorFlow loads its kernels eagerly and its BFC allocator keeps
  a pool: its range starts higher. ``torch.cuda.memory_reserved()`` does not count the
  context, ``nvidia-smi`` does: the figure to check is the GPU's memory minus this term.
- ``allocator_reserve``: the caching allocator's rounding (512-byte blocks, 2 MiB / 20 MiB
  segments) and fragmentation, reserved minus allocated bytes at the peak, as a fraction of
  the step's tensor peak.

``benchmarks/gpu_check.py`` records ``max_memory_allocated`` and ``max_memory_reserved`` on a
GPU beside the prediction: the measured figures these priors stand in for.
"""

from __future__ import annotations

# (value, low, high) GiB of the context + library handles, by framework and generation.
FIXED_GIB: dict[str, dict[str, tuple[float, float, float]]] = {
    "torch": {
        "Pascal": (0.35, 0.25, 0.6),
        "Volta": (0.4, 0.3, 0.7),
        "Turing": (0.35, 0.25, 0.6),
        "Ampere": (0.45, 0.3, 0.8),
        "Ada Lovelace": (0.45, 0.3, 0.8),
        "Hopper": (0.55, 0.4, 1.0),
        "Blackwell": (0.6, 0.4, 1.2),
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
# Any generation or framework not listed: the widest range of the table.
GENERIC_FIXED_GIB = (0.6, 0.25, 1.8)

# Reserved minus allocated at the peak, as a fraction of the tensor peak (value, low, high).
RESERVE_FRACTION = {"torch": (0.05, 0.0, 0.2), "keras": (0.1, 0.0, 0.3)}
GENERIC_RESERVE_FRACTION = (0.08, 0.0, 0.3)


def fixed_gib(framework: str, generation: str | None) -> tuple[tuple[float, float, float], str]:
    """The fixed-cost prior in GiB and the words saying which row it is."""
    row = FIXED_GIB.get(framework, {}).get(generation or "")
    if row is None:
        return GENERIC_FIXED_GIB, f"prior: CUDA context + library workspaces, {framework}, any GPU"
    return row, f"prior: CUDA context + library workspaces, {framework} on {generation}"


def reserve_fraction(framework: str) -> tuple[float, float, float]:
    return RESERVE_FRACTION.get(framework, GENERIC_RESERVE_FRACTION)
