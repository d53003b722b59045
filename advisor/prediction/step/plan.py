"""A training plan: how one training step is run on a machine's GPUs (issue #35).

A plan = precision (``fp32``, ``tf32``, ``bf16``, ``fp16`` with loss scaling) x micro-batch
with gradient-accumulation steps x activation checkpointing (``none`` / ``blocks``) x sharding
across the machine's GPUs (``none``, ``optimizer``, ``gradients``, ``parameters``: ZeRO-1/2/3,
FSDP's ``SHARD_GRAD_OP`` / ``FULL_SHARD``). The global batch keeps its meaning: accumulation
splits each device's batch into micro-batches, it does not change the epochs to the target.

Precisions, as PyTorch runs them:

- ``fp32``: PyTorch's defaults (float32 tensors; cuDNN convolutions may use TF32 on Ampere and
  later, matrix products do not: ``torch.backends.cuda.matmul.allow_tf32 = False``);
- ``tf32``: matrix products on TF32 tensor cores too (``torch.set_float32_matmul_precision(
  "high")``); needs TF32 tensor cores (compute capability 8.0, Ampere, or later);
- ``bf16``: ``torch.autocast(dtype=torch.bfloat16)`` over forward and loss (products in bf16,
  float32 master weights and optimizer); needs compute capability 8.0 or later;
- ``fp16``: autocast in float16 with ``torch.amp.GradScaler`` (loss scaling); needs fast fp16
  (compute capability 6.0, Pascal, or later; tensor cores from 7.0, Volta).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from advisor.errors import AdvisorError, unknown_value_error

PRECISIONS = ("fp32", "tf32", "bf16", "fp16")
PRECISION_CHOICES = ("auto", *PRECISIONS)  # --precision: auto lets the study choose per GPU
# The default everywhere --precision exists: on tensor-core GPUs mixed precision is what people
# run; CPUs and GPUs without fast 16-bit arithmetic (K80) keep fp32 (``auto_precision``).
DEFAULT_PRECISION = "auto"
PRECISION_HELP = (
    "How each GPU trains: fp32 (PyTorch's defaults), tf32 (matrix products on TF32 tensor "
    "cores), bf16 or fp16 (autocast mixed precision; fp16 with loss scaling), or auto (bf16 "
    "where the GPU has it, else fp16, else fp32; the default). A GPU without the precision is "
    "left out, with the reason."
)
PLAN_SEARCH_HELP = (
    "Fix parts of each GPU's training plan, field=value pairs: accumulation=STEPS, "
    "checkpointing=none|blocks, sharding=none|optimizer|gradients|parameters (default: the "
    "fastest plan that fits each machine and batch; the global batch is kept)."
)
CHECKPOINTING = ("none", "blocks")
SHARDING = ("none", "optimizer", "gradients", "parameters")
# Across machines (issue #49): ``nodes`` shards within each machine and replicates across them
# (HSDP: FSDP2's fully_shard over a 2-D device mesh), ``none`` shards over every process.
REPLICATE = ("none", "nodes")
# What ``python -m advisor.train`` runs (``advisor.probes.sharding``: ZeRO-1 by torch's
# ZeroRedundancyOptimizer, ZeRO-2/3 by FSDP2's fully_shard): the sharding the suggest search
# may choose by itself.
RUNNABLE_SHARDING = ("none", "optimizer", "gradients", "parameters")
SHARDING_WORDS = {
    "optimizer": "optimizer state sharded (ZeRO-1)",
    "gradients": "optimizer state and gradients sharded (ZeRO-2)",
    "parameters": "parameters, gradients and optimizer state sharded (ZeRO-3 / FSDP)",
}
PRECISION_WORDS = {
    "fp32": "fp32",
    "tf32": "tf32",
    "bf16": "bf16",
    "fp16": "fp16 with loss scaling",
}


@dataclass(frozen=True)
class TrainingPlan:
    """How each step runs: ``precision``, ``accumulation`` micro-batches per optimizer step,
    ``checkpointing`` of blocks' activations, ``sharding`` of state across the GPUs, and on
    several machines ``replicate`` ("nodes": the sharded state replicated across machines,
    sharded within each: HSDP; issue #49)."""

    precision: str = "fp32"
    accumulation: int = 1
    checkpointing: str = "none"
    sharding: str = "none"
    replicate: str = "none"

    def __post_init__(self) -> None:
        for kind, value, valid in (
            ("precision", self.precision, PRECISIONS),
            ("checkpointing", self.checkpointing, CHECKPOINTING),
            ("sharding", self.sharding, SHARDING),
            ("replicate", self.replicate, REPLICATE),
        ):
            if value not in valid:
                raise unknown_value_error(kind, str(value), valid)
        if isinstance(self.accumulation, bool) or not isinstance(self.accumulation, int):
            raise AdvisorError(
                f"Accumulation steps must be a whole number, got {self.accumulation!r}.",
                "use 1 (none) or more, e.g. accumulation=8.",
            )
        if self.accumulation < 1:
            raise AdvisorError(
                f"Accumulation steps must be >= 1, got {self.accumulation}.",
                "use 1 (no accumulation) or more, e.g. accumulation=8.",
            )

    @property
    def amp(self) -> bool:
        """Mixed precision: autocast to a 16-bit type over fp32 master weights."""
        return self.precision in ("bf16", "fp16")

    @property
    def half_dtype(self) -> str:
        """The autocast dtype ("bfloat16", "float16"), or "" without mixed precision."""
        return {"bf16": "bfloat16", "fp16": "float16"}.get(self.precision, "")

    def micro_batch(self, per_device_batch: int) -> int:
        """The batch of each micro-step on one device; an error when the plan asks for more
        accumulation steps than the device has samples."""
        if self.accumulation > per_device_batch:
            raise AdvisorError(
                f"The plan accumulates {self.accumulation} micro-batches but each GPU gets "
                f"only {per_device_batch} samples per step.",
                f"use at most {per_device_batch} accumulation steps, or a larger batch size.",
            )
        return math.ceil(per_device_batch / self.accumulation)

    def check(self, gpus: int, framework: str = "torch", strategy: str | None = None) -> None:
        """An AdvisorError when the plan contradicts itself on ``gpus`` GPUs with
        ``framework`` and data-parallel ``strategy`` ("ddp", "dp" or None)."""
        if self.sharding != "none" and strategy == "dp":
            raise AdvisorError(
                f"Sharding ({self.sharding}) needs one process per GPU, not --strategy dp.",
                "use --strategy ddp (or auto), or sharding none.",
            )
        if framework == "keras" and (self.sharding != "none" or self.checkpointing != "none"):
            raise AdvisorError(
                "Keras plans have no per-block checkpointing or sharding here.",
                "use checkpointing none and sharding none with --framework keras.",
            )

    def words(self, per_device_batch: int | None = None) -> str:
        """The plan in words: "bf16, micro-batch 4 x 8 accumulation steps, checkpointed
        blocks, parameters, gradients and optimizer state sharded (ZeRO-3 / FSDP)"."""
        parts = [PRECISION_WORDS[self.precision]]
        if self.accumulation > 1:
            micro = (
                f"micro-batch {self.micro_batch(per_device_batch)} x "
                if per_device_batch is not None
                else ""
            )
            parts.append(f"{micro}{self.accumulation} accumulation steps")
        if self.checkpointing == "blocks":
            parts.append("checkpointed blocks")
        if self.sharding != "none":
            parts.append(SHARDING_WORDS[self.sharding])
        if self.replicate == "nodes":
            parts.append("replicated across machines, sharded within each (HSDP)")
        return ", ".join(parts)

    def key(self) -> str:
        """A short stable key ("bf16/a8/ckpt/shard-parameters"), for memo and cache keys."""
        out = [self.precision, f"a{self.accumulation}"]
        if self.checkpointing != "none":
            out.append("ckpt")
        if self.sharding != "none":
            out.append(f"shard-{self.sharding}")
        if self.replicate != "none":
            out.append(f"replicate-{self.replicate}")
        return "/".join(out)

    def arg(self) -> str:
        """The plan as ``--plan`` text for ``python -m advisor.train`` (``parse_plan``'s
        input): "precision=bf16,accumulation=4,checkpointing=blocks,sharding=none"."""
        return (
            f"precision={self.precision},accumulation={self.accumulation},"
            f"checkpointing={self.checkpointing},sharding={self.sharding}"
        ) + (f",replicate={self.replicate}" if self.replicate != "none" else "")

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "precision": self.precision,
            "accumulation": self.accumulation,
            "checkpointing": self.checkpointing,
            "sharding": self.sharding,
            "words": self.words(),
        }
        if self.replicate != "none":  # one machine's plans keep their old form
            out["replicate"] = self.replicate
        return out

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TrainingPlan:
        unknown = set(d) - {
            "precision",
            "accumulation",
            "checkpointing",
            "sharding",
            "replicate",
            "words",
        }
        if unknown:
            raise unknown_value_error(
                "plan field", sorted(unknown)[0], ("precision", "accumulation", "checkpointing",
                                                   "sharding")
            )  # fmt: skip
        return cls(
            precision=str(d.get("precision", "fp32")),
            accumulation=_whole(d.get("accumulation", 1)),
            checkpointing=str(d.get("checkpointing", "none")),
            sharding=str(d.get("sharding", "none")),
            replicate=str(d.get("replicate", "none")),
        )


class PrecisionLacking(AdvisorError, ValueError):
    """A machine's GPU lacks the precision asked for: the machine is left out."""


class PlanNotRunnable(AdvisorError, ValueError):
    """``python -m advisor.train`` cannot run the plan on this model (checkpointing=blocks on
    a model with no container of blocks): the plan is never offered for it."""


FIELDS = {"precision": "precision", "accumulation": "accumulation", "accumulate": "accumulation",
          "checkpointing": "checkpointing", "checkpoint": "checkpointing",
          "sharding": "sharding", "shard": "sharding", "replicate": "replicate"}  # fmt: skip


def parse_plan(text: str, precision: str | None = None) -> TrainingPlan:
    """A plan from ``--plan`` text, comma-separated ``field=value`` pairs
    ("accumulation=8,checkpointing=blocks,sharding=parameters"; a field given twice with two
    values is an error); ``precision`` (not "auto") sets the precision when the text does not,
    and contradicting the text's is an error (``one_precision``)."""
    values: dict[str, Any] = {}
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        name, sep, value = part.partition("=")
        if not sep:
            raise AdvisorError(
                f"Plan part {part!r} is not field=value.",
                "write e.g. --plan accumulation=8,checkpointing=blocks,sharding=parameters.",
            )
        field_name = FIELDS.get(name.strip().lower())
        if field_name is None:
            raise unknown_value_error("plan field", name.strip(), sorted(set(FIELDS.values())))
        if field_name in values and values[field_name] != value.strip().lower():
            raise AdvisorError(
                f"The plan gives {field_name} twice ({values[field_name]} and "
                f"{value.strip().lower()}).",
                f"give {field_name} once in --plan.",
            )
        values[field_name] = value.strip().lower()
    if precision not in (None, "auto"):
        values["precision"] = one_precision(values.get("precision"), str(precision))
    if "accumulation" in values:
        values["accumulation"] = _whole(values["accumulation"])
    return TrainingPlan.from_dict(values)


def one_precision(in_plan: str | None, option: str | None) -> str:
    """The one precision of ``--plan precision=...`` and ``--precision`` (None or "auto": not
    given); an error when both are given and differ (issue #50: the option won silently)."""
    given = option if option not in (None, "auto") else None
    if in_plan and given and in_plan != given:
        raise AdvisorError(
            f"--plan says precision={in_plan} and --precision says {given}.",
            "give the precision once: in --plan or with --precision.",
        )
    return str(in_plan or given or "auto")


def _whole(value: Any) -> int:
    try:
        return int(str(value))
    except ValueError:
        raise AdvisorError(
            f"Accumulation steps must be a whole number, got {value!r}.",
            "use 1 (none) or more, e.g. accumulation=8.",
        ) from None


def check_precision(precision: str) -> str:
    """``precision`` if it is one of auto, fp32, tf32, bf16, fp16; else a one-line error."""
    if precision not in PRECISION_CHOICES:
        raise unknown_value_error("precision", str(precision), PRECISION_CHOICES)
    return precision


def plan_fields(text: str | None, precision: str | None = None) -> dict[str, Any]:
    """The fields ``--plan`` text fixes ({} when none: everything is searched), checked, also
    against ``--precision`` (``one_precision``)."""
    if not text:
        return {}
    given = {p.partition("=")[0].strip().lower() for p in text.split(",") if p.strip()}
    plan = parse_plan(text)
    fields = {FIELDS.get(n, n): getattr(plan, FIELDS.get(n, n)) for n in given}
    one_precision(fields.get("precision"), precision)
    return fields


def searches(fixed: Mapping[str, Any]) -> bool:
    """Whether a plan other than the plain one may be chosen (``fixed`` does not pin the
    accumulation, checkpointing and sharding to the plain plan's)."""
    plain = TrainingPlan()
    return any(
        fixed.get(f, getattr(plain, f)) != getattr(plain, f) or f not in fixed
        for f in ("accumulation", "checkpointing", "sharding")
    )
