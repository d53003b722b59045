"""GPT-2 (and GPT-3-style), BERT and OPT networks in plain PyTorch, as Hugging Face's eager
implementations compute them (``GPT2LMHeadModel``, ``BertForMaskedLM``, ``OPTForCausalLM``):
the same parameters, products, normalisations and activations, so the traced FLOPs and
shapes are the real models'. Configs are Hugging Face style dicts
(``examples/model_configs/``). Built by :mod:`examples.transformers`.

What each family does (pre/post layer norm, positions, activation):

- GPT-2 / GPT-3 style: learned absolute positions, pre-LN blocks and a final LN, fused QKV
  projection, causal self-attention, MLP 4 x hidden with GELU (tanh form, ``gelu_new``),
  LM head tied to the token embedding.
- BERT: word + learned position + token-type embeddings, LN; post-LN blocks, MLP
  ``intermediate_size`` with exact GELU; masked-LM head (dense, GELU, LN, decoder tied to the
  word embedding, with its own bias). No pooler (the masked-LM model has none).
- OPT: token embedding of ``word_embed_proj_dim`` (projected in/out when it differs from the
  hidden size), learned positions with OPT's offset of 2, pre-LN (``do_layer_norm_before``)
  blocks, ReLU MLP of ``ffn_dim``, final LN, LM head tied to the token embedding.

Attention is computed as the eager models do (two batched products around a softmax), not
through ``scaled_dot_product_attention``.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn


class SelfAttention(nn.Module):
    """Multi-head self-attention: QKV projections, ``softmax(q k^T / sqrt(d) [+ mask]) v``,
    output projection. ``fused_qkv`` is GPT-2's single ``c_attn``; ``causal`` masks the
    future."""

    def __init__(
        self, hidden: int, heads: int, dropout: float, causal: bool, fused_qkv: bool, n_pos: int
    ) -> None:
        super().__init__()
        if hidden % heads:
            raise ValueError(f"hidden size {hidden} is not a multiple of {heads} heads")
        self.heads, self.head_dim, self.causal = heads, hidden // heads, causal
        if fused_qkv:
            self.qkv: nn.Module = nn.Linear(hidden, 3 * hidden)
        else:
            self.q, self.k, self.v = (nn.Linear(hidden, hidden) for _ in range(3))
        self.fused = fused_qkv
        self.out = nn.Linear(hidden, hidden)
        self.attn_drop = nn.Dropout(dropout)
        if causal:
            mask = torch.ones(n_pos, n_pos, dtype=torch.bool).tril()
            self.register_buffer("mask", mask.view(1, 1, n_pos, n_pos), persistent=False)

    def _split(self, x: torch.Tensor) -> torch.Tensor:
        b, t, _ = x.shape
        return x.view(b, t, self.heads, self.head_dim).transpose(1, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, h = x.shape
        if self.fused:
            q, k, v = self.qkv(x).split(h, dim=2)
        else:
            q, k, v = self.q(x), self.k(x), self.v(x)
        q, k, v = self._split(q), self._split(k), self._split(v)
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.head_dim)
        if self.causal:
            keep = self.mask[:, :, :t, :t]
            scores = torch.where(keep, scores, torch.finfo(scores.dtype).min)
        probs = self.attn_drop(torch.softmax(scores, dim=-1))
        context = torch.matmul(probs, v).transpose(1, 2).reshape(b, t, h)
        return self.out(context)


class Mlp(nn.Module):
    def __init__(self, hidden: int, inner: int, act: nn.Module) -> None:
        super().__init__()
        self.up, self.act, self.down = nn.Linear(hidden, inner), act, nn.Linear(inner, hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(self.act(self.up(x)))


class Block(nn.Module):
    """One transformer layer: attention and MLP, each with a residual and dropout; layer norm
    before each (``pre_ln``, GPT-2, OPT) or after each residual sum (BERT)."""

    def __init__(
        self,
        hidden: int,
        heads: int,
        inner: int,
        act: nn.Module,
        *,
        dropout: float,
        attn_dropout: float,
        eps: float,
        pre_ln: bool,
        causal: bool,
        fused_qkv: bool,
        n_pos: int,
    ) -> None:
        super().__init__()
        self.pre_ln = pre_ln
        self.attn = SelfAttention(hidden, heads, attn_dropout, causal, fused_qkv, n_pos)
        self.ln1, self.ln2 = nn.LayerNorm(hidden, eps=eps), nn.LayerNorm(hidden, eps=eps)
        self.mlp = Mlp(hidden, inner, act)
        self.drop1, self.drop2 = nn.Dropout(dropout), nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.pre_ln:
            x = x + self.drop1(self.attn(self.ln1(x)))
            return x + self.drop2(self.mlp(self.ln2(x)))
        x = self.ln1(x + self.drop1(self.attn(x)))
        return self.ln2(x + self.drop2(self.mlp(x)))


class Gpt2(nn.Module):
    """``GPT2LMHeadModel``: token ids (B, T) -> next-token logits (B, T, vocab)."""

    def __init__(self, c: dict[str, Any]) -> None:
        super().__init__()
        d, n_pos = c["n_embd"], c["n_positions"]
        self.wte, self.wpe = nn.Embedding(c["vocab_size"], d), nn.Embedding(n_pos, d)
        self.drop = nn.Dropout(c.get("embd_pdrop", 0.1))
        act = nn.GELU(approximate="tanh")  # gelu_new
        self.blocks = nn.ModuleList(
            Block(
                d,
                c["n_head"],
                c.get("n_inner") or 4 * d,
                act,
                dropout=c.get("resid_pdrop", 0.1),
                attn_dropout=c.get("attn_pdrop", 0.1),
                eps=c.get("layer_norm_epsilon", 1e-5),
                pre_ln=True,
                causal=True,
                fused_qkv=True,
                n_pos=n_pos,
            )
            for _ in range(c["n_layer"])
        )
        self.ln_f = nn.LayerNorm(d, eps=c.get("layer_norm_epsilon", 1e-5))
        self.lm_head = nn.Linear(d, c["vocab_size"], bias=False)
        self.lm_head.weight = self.wte.weight  # tied

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        pos = torch.arange(ids.shape[1], device=ids.device)
        x = self.drop(self.wte(ids) + self.wpe(pos))
        for block in self.blocks:
            x = block(x)
        return self.lm_head(self.ln_f(x))


class Bert(nn.Module):
    """``BertForMaskedLM``: token ids (B, T) -> vocabulary logits at every position."""

    def __init__(self, c: dict[str, Any]) -> None:
        super().__init__()
        d, eps = c["hidden_size"], c.get("layer_norm_eps", 1e-12)
        self.word = nn.Embedding(c["vocab_size"], d, padding_idx=c.get("pad_token_id", 0))
        self.position = nn.Embedding(c["max_position_embeddings"], d)
        self.token_type = nn.Embedding(c.get("type_vocab_size", 2), d)
        self.ln, self.drop = nn.LayerNorm(d, eps=eps), nn.Dropout(c["hidden_dropout_prob"])
        self.blocks = nn.ModuleList(
            Block(
                d,
                c["num_attention_heads"],
                c["intermediate_size"],
                nn.GELU(),
                dropout=c["hidden_dropout_prob"],
                attn_dropout=c["attention_probs_dropout_prob"],
                eps=eps,
                pre_ln=False,
                causal=False,
                fused_qkv=False,
                n_pos=c["max_position_embeddings"],
            )
            for _ in range(c["num_hidden_layers"])
        )
        self.transform = nn.Sequential(nn.Linear(d, d), nn.GELU(), nn.LayerNorm(d, eps=eps))
        self.decoder = nn.Linear(d, c["vocab_size"])
        self.decoder.weight = self.word.weight  # tied; the decoder keeps its own bias

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        t = ids.shape[1]
        pos = torch.arange(t, device=ids.device)
        types = torch.zeros_like(pos)
        x = self.drop(self.ln(self.word(ids) + self.token_type(types) + self.position(pos)))
        for block in self.blocks:
            x = block(x)
        return self.decoder(self.transform(x))


class Opt(nn.Module):
    """``OPTForCausalLM``: token ids (B, T) -> next-token logits (B, T, vocab)."""

    POSITION_OFFSET = 2  # OPT's learned positions start at index 2

    def __init__(self, c: dict[str, Any]) -> None:
        super().__init__()
        d, proj = c["hidden_size"], c.get("word_embed_proj_dim", c["hidden_size"])
        self.embed = nn.Embedding(c["vocab_size"], proj, padding_idx=c.get("pad_token_id", 1))
        self.positions = nn.Embedding(c["max_position_embeddings"] + self.POSITION_OFFSET, d)
        self.project_in = nn.Linear(proj, d, bias=False) if proj != d else None
        self.project_out = nn.Linear(d, proj, bias=False) if proj != d else None
        pre_ln = bool(c.get("do_layer_norm_before", True))
        self.drop = nn.Dropout(c.get("dropout", 0.1))
        self.blocks = nn.ModuleList(
            Block(
                d,
                c["num_attention_heads"],
                c["ffn_dim"],
                nn.ReLU(),
                dropout=c.get("dropout", 0.1),
                attn_dropout=c.get("attention_dropout", 0.0),
                eps=1e-5,
                pre_ln=pre_ln,
                causal=True,
                fused_qkv=False,
                n_pos=c["max_position_embeddings"],
            )
            for _ in range(c["num_hidden_layers"])
        )
        self.final_ln = nn.LayerNorm(d) if pre_ln else None
        self.lm_head = nn.Linear(proj, c["vocab_size"], bias=False)
        self.lm_head.weight = self.embed.weight  # tied

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        pos = torch.arange(ids.shape[1], device=ids.device) + self.POSITION_OFFSET
        x = self.embed(ids)
        if self.project_in is not None:
            x = self.project_in(x)
        x = self.drop(x + self.positions(pos))
        for block in self.blocks:
            x = block(x)
        if self.final_ln is not None:
            x = self.final_ln(x)
        if self.project_out is not None:
            x = self.project_out(x)
        return self.lm_head(x)
