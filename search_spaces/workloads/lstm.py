"""`lstm`: a 2-layer LSTM language model, Penn Treebank sized (PyTorch version).

Architecture (identical in ``lstm_keras``): token embedding (vocabulary 10,000, width
``hidden``), two stacked LSTM layers of ``hidden`` units (dropout between layers and before
the output), a dense layer to 10,000 next-token logits at every position; sequences of 35
tokens. ``hidden`` is 200 by default (Zaremba et al.'s small model); 650 is their medium one.
PyTorch's LSTM carries two bias vectors per layer where Keras has one; their sum is the same
function, so the second (``bias_hh``) is fixed at zero and frozen: both frameworks then train
exactly the same parameters.

Data: generated Zipf-distributed tokens with learnable successor structure
(``synthetic.zipf_tokens``). Real sizes used for extrapolation: Penn Treebank's 929,589
training and 73,760 validation tokens, i.e. 26,559 and 2,107 sequences of 35 tokens.
Recipe: SGD lr 1.0 with gradient-norm clipping 5 in Zaremba et al.; Adam lr 1e-3 trains this
generated task faster and is the default here.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from advisor.search_spaces.workloads import _setup
from advisor.search_spaces.workloads.synthetic import zipf_tokens

VOCAB = 10_000
SEQ_LEN = 35
TRAIN_TOKENS = 929_589
VAL_TOKENS = 73_760
N_TRAIN = TRAIN_TOKENS // SEQ_LEN
N_VAL = VAL_TOKENS // SEQ_LEN


def lstm_torch(hidden: int = 200, dropout: float = 0.0) -> Any:
    """The language model as a ``torch.nn.Module`` mapping (B, 35) tokens to (B, 35, V) logits."""
    import torch
    from torch import nn

    class LstmLM(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = nn.Embedding(VOCAB, hidden)
            self.lstm = nn.LSTM(hidden, hidden, num_layers=2, batch_first=True, dropout=dropout)
            self.drop = nn.Dropout(dropout)
            self.head = nn.Linear(hidden, VOCAB)
            for layer in range(2):
                bias = getattr(self.lstm, f"bias_hh_l{layer}")
                with torch.no_grad():
                    bias.zero_()
                bias.requires_grad_(False)

        def forward(self, tokens: torch.Tensor) -> torch.Tensor:
            out, _ = self.lstm(self.embed(tokens))
            return self.head(self.drop(out))

    return LstmLM()


class _TokenLoss:
    """Cross-entropy over every position: (B, T, V) logits against (B, T) targets."""

    def __init__(self) -> None:
        from torch import nn

        self._loss = nn.CrossEntropyLoss()

    def __call__(self, logits: Any, targets: Any) -> Any:
        return self._loss(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def build(
    framework: str,
    network: Callable[..., Any],
    batch_size: int = 20,
    n_train: int = N_TRAIN,
    n_val: int = N_VAL,
    seed: int = 0,
    lr: float = 1e-3,
    momentum: float = 0.9,
    weight_decay: float = 0.0,
    dropout: float = 0.0,
    optimizer: str = "adam",
    hidden: int = 200,
    **_ignored: Any,
) -> Any:
    """Build the lstm setup in ``framework`` (``TorchSetup`` or ``KerasSetup``)
    around ``network`` (the network in that framework) on generated
    Zipfian token sequences."""
    recipe = _setup.Recipe(batch_size, seed, optimizer, lr, momentum, weight_decay)
    data = _setup.generate(
        lambda: zipf_tokens(n_train, SEQ_LEN, VOCAB, seed=seed),
        lambda: zipf_tokens(n_val, SEQ_LEN, VOCAB, seed=seed + 1),
    )
    if framework == "keras":
        data = data.converted(x=_int32, y=_int32)
        return recipe.keras(partial(network, int(hidden), dropout), data)
    return recipe.torch(partial(network, int(hidden), dropout), data, loss_fn=_TokenLoss())


def _int32(tokens: Any) -> Any:
    return tokens.astype("int32")


build_torch = partial(build, "torch", lstm_torch)
