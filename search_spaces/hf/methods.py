"""The fine-tuning method applied to a causal language model, with the field's own tools.

- ``full``: every parameter trained.
- ``frozen``: the input embedding and the first ``frozen`` blocks (default: half of them) get
  ``requires_grad=False``: no gradients, no optimizer state, and autograd computes no weight
  gradients for them (their products' ``weight_grad`` GEMMs are absent from the trace).
- ``lora``: ``peft.get_peft_model`` with a ``LoraConfig`` (rank 16, alpha 2 x rank, dropout
  0.05 unless ``dropout=`` says otherwise, every linear layer of the blocks by default, as the QLoRA paper recommends): the base
  frozen, the adapters trained.
- ``qlora``: LoRA over a base whose linear layers are 4-bit NF4 with double quantisation and
  bf16 compute (bitsandbytes ``Linear4bit``, ``BitsAndBytesConfig(load_in_4bit=True,
  bnb_4bit_quant_type="nf4", bnb_4bit_use_double_quant=True)``). On a machine with a CUDA
  device the real job loads the model so (``from_pretrained``). Traced on the meta device, each
  such layer is ``Traced4bit`` (:func:`traced4bit_class`): its bytes are bitsandbytes' (4 bits a weight, one 8-bit
  absmax per 64 weights, one float32 second-level scale per 256 absmax), its forward and
  backward dequantise the weight into a transient bf16 copy (as bitsandbytes' ``MatMul4Bit``
  does in both passes) that is freed after the product.
"""

from __future__ import annotations

import functools
from typing import Any

from advisor.errors import AdvisorError

LORA_DROPOUT = 0.05
BLOCK = 64  # NF4 weights per absmax (bitsandbytes' default blocksize)
BLOCK2 = 256  # absmax per second-level float32 scale (double quantisation)


def trainable_parameters(model: Any) -> list[Any]:
    """The parameters the optimizer updates."""
    return [p for p in model.parameters() if p.requires_grad]


def apply_method(model: Any, ref: Any, traced: bool) -> Any:
    """``model`` (a transformers causal LM) prepared for ``ref.method``; ``traced``: built on
    the meta device for the memory and time models (QLoRA's base then ``Traced4bit``)."""
    method = ref.method
    if method == "full":
        return model
    if method == "frozen":
        _freeze(model, ref)
        return half_base(model)
    if method == "qlora" and not traced:
        check_bitsandbytes()
    return half_base(lora(model, ref, quantised=method == "qlora" and traced))


def half_base(model: Any) -> Any:
    """The frozen floating-point parameters held in bfloat16 (``from_pretrained(...,
    dtype=torch.bfloat16)``, as PEFT's and the QLoRA paper's recipes load the base); the
    trained ones stay float32 master weights under the plan's autocast."""
    import torch

    for p in model.parameters():
        if not p.requires_grad and p.is_floating_point() and p.dtype != torch.bfloat16:
            p.data = p.data.to(torch.bfloat16)
    return model


def _freeze(model: Any, ref: Any) -> None:
    """The input embedding and the first ``frozen`` blocks (default half) frozen."""
    layers = model.model.layers
    n = int(ref.options.get("frozen", len(layers) // 2))
    if n > len(layers):
        raise AdvisorError(f"frozen={n} but the model has {len(layers)} blocks.",
                           f"give frozen=0..{len(layers)}.")  # fmt: skip
    for module in (model.get_input_embeddings(), *list(layers)[:n]):
        for p in module.parameters():
            p.requires_grad_(False)


def lora(model: Any, ref: Any, quantised: bool = False) -> Any:
    """``peft.get_peft_model`` over ``model``; ``quantised``: then every frozen linear layer
    of the blocks replaced by ``Traced4bit`` (the trace's QLoRA base)."""
    from peft import LoraConfig, get_peft_model

    rank = int(ref.options.get("rank", 16))
    targets = str(ref.options.get("targets", "all-linear"))
    config = LoraConfig(
        r=rank,
        lora_alpha=int(ref.options.get("alpha", 2 * rank)),
        lora_dropout=float(ref.options.get("dropout", LORA_DROPOUT)),
        target_modules=targets if targets == "all-linear" else targets.split("+"),
        task_type="CAUSAL_LM",
    )
    peft_model = get_peft_model(model, config)
    if quantised:
        quantise_blocks(peft_model)
    return peft_model


def check_bitsandbytes() -> None:
    """One line where QLoRA cannot run: bitsandbytes missing, or no CUDA device."""
    import importlib.util

    import torch

    has_bnb = importlib.util.find_spec("bitsandbytes") is not None
    if not has_bnb or not torch.cuda.is_available():
        lacks = "no CUDA device" if has_bnb else "no bitsandbytes"
        raise AdvisorError(
            f"method=qlora needs bitsandbytes and a CUDA device, and this machine has {lacks}.",
            "run QLoRA on a GPU machine with `pip install bitsandbytes`, or use method=lora.",
        )


def quantise_blocks(model: Any) -> int:
    """Every ``nn.Linear`` inside the blocks that is not an adapter (``lora_A``/``lora_B``)
    replaced by ``Traced4bit``; returns how many. The output head stays as it is
    (bitsandbytes through transformers skips it too)."""
    import torch

    blocks = next(m for m in model.modules() if isinstance(m, torch.nn.ModuleList) and len(m))
    count = 0
    for block in blocks:
        for name, child in list(block.named_modules()):
            for sub, leaf in list(child.named_children()):
                if (
                    type(leaf) is torch.nn.Linear
                    and sub not in ("lora_A", "lora_B")
                    and not ("lora_A" in name or "lora_B" in name)
                ):
                    setattr(child, sub, traced4bit_class()(leaf))
                    count += 1
    return count


def nf4_bytes(numel: int) -> int:
    """Bytes of ``numel`` weights as NF4 with double quantisation: 4 bits each, an 8-bit
    absmax per ``BLOCK``, a float32 scale (and offset) per ``BLOCK2`` absmax."""
    blocks = -(-numel // BLOCK)
    return numel // 2 + blocks + 8 * -(-blocks // BLOCK2)


@functools.cache
def traced4bit_class() -> type:
    """The ``Traced4bit`` module class (made on first use: torch is imported only then)."""
    import torch

    class Dequantised(torch.autograd.Function):
        """``x @ dequant(w).T`` saving only ``x``'s need: the 4-bit weight, dequantised again
        in backward (bitsandbytes' ``MatMul4Bit``); no weight gradient (frozen)."""

        @staticmethod
        def forward(ctx: Any, x: Any, packed: Any, absmax: Any, shape: Any) -> Any:
            ctx.save_for_backward(packed, absmax)
            ctx.shape = shape
            return x @ _dequantise(packed, absmax, shape, x.dtype).t()

        @staticmethod
        def backward(ctx: Any, grad: Any) -> Any:
            packed, absmax = ctx.saved_tensors
            return grad @ _dequantise(packed, absmax, ctx.shape, grad.dtype), None, None, None

    class Traced4bit(torch.nn.Module):
        """A frozen linear layer held as bitsandbytes' NF4 with double quantisation, for the
        trace: ``packed`` (uint8, two weights a byte), ``absmax`` (uint8 per ``BLOCK``) and
        ``scales`` (float32 per ``BLOCK2`` absmax, with its offset); the bias as it was."""

        def __init__(self, linear: Any) -> None:
            super().__init__()
            out_f, in_f = linear.weight.shape
            self.in_features, self.out_features = in_f, out_f
            n = out_f * in_f
            blocks = -(-n // BLOCK)
            kw = {"device": linear.weight.device, "requires_grad": False}
            self.packed = torch.nn.Parameter(torch.empty(out_f, -(-in_f // 2), dtype=torch.uint8,
                                                         device=kw["device"]), False)  # fmt: skip
            self.absmax = torch.nn.Parameter(
                torch.empty(blocks, dtype=torch.uint8, device=kw["device"]), False
            )
            self.scales = torch.nn.Parameter(
                torch.empty(2 * -(-blocks // BLOCK2), device=kw["device"]), False
            )
            self.bias = linear.bias

        def forward(self, x: Any) -> Any:
            dtype = x.dtype if x.dtype != torch.float32 else _compute_dtype()
            y = Dequantised.apply(x.to(dtype), self.packed, self.absmax,
                                  (self.out_features, self.in_features))  # fmt: skip
            return y if self.bias is None else y + self.bias

    return Traced4bit


def _compute_dtype() -> Any:
    import torch

    return torch.bfloat16


def _dequantise(packed: Any, absmax: Any, shape: Any, dtype: Any) -> Any:
    """The bf16 working copy of a 4-bit weight: the two nibbles of each byte spread out and
    scaled (two memory-bound kernels; the values are not the weights', which the trace never
    reads)."""
    in_f = shape[1]
    wide = packed.repeat_interleave(2, dim=1)[:, :in_f].to(dtype)
    return wide * absmax[:1].to(dtype)
