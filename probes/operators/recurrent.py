"""The kernels of a recurrent layer (LSTM, GRU, plain RNN) as cuDNN runs it on a GPU.

cuDNN's standard RNN algorithm, per layer and direction, for ``T`` time steps of a batch of
``B``, input width ``I``, hidden width ``H`` and ``G`` gates (LSTM 4, GRU 3, RNN 1):

- forward: one product for the input projection of all steps (``T*B x I`` by ``I x G*H``),
  then per step one recurrent product (``B x H`` by ``H x G*H``) and one element-wise gate
  kernel;
- backward (data): per step the gate kernel's backward and the recurrent product's data
  gradient (``B x G*H`` by ``G*H x H``), then one product for the input gradient of all steps
  (``T*B x G*H`` by ``G*H x I``; not for the first layer when its input needs no gradient);
- backward (weights): one product each for the input and recurrent weight gradients
  (``G*H x T*B`` by ``T*B x I`` and ``... x H``) and one reduction for the biases.

PyTorch on the CPU or the meta device instead decomposes the layer into many small ops; the
tracer records these records in their place, for PyTorch and Keras alike, so a recurrent
model's trace is the GPU's, whatever device traced it. Between stacked layers a training
step applies dropout (one element-wise kernel) when the layer's dropout is set.
"""

from __future__ import annotations

from advisor.probes.operators.types import Operator

GATES = {"lstm": 4, "gru": 3, "rnn_tanh": 1, "rnn_relu": 1}
ELEMENT_BYTES = {"float64": 8, "float32": 4, "bfloat16": 2, "float16": 2}


def recurrent_records(
    cell: str,
    phase: str,
    *,
    steps: int,
    batch: int,
    input_size: int,
    hidden: int,
    layers: int = 1,
    directions: int = 1,
    dropout: float = 0.0,
    input_grad: bool = False,
    bias: bool = True,
    dtype: str = "float32",
) -> list[Operator]:
    """The records of one recurrent layer stack's ``phase`` (forward or backward)."""
    if cell not in GATES:
        raise ValueError(f"cell must be one of {sorted(GATES)}, but got {cell!r}")
    if phase not in ("forward", "backward"):
        raise ValueError(f"phase must be forward or backward, but got {phase!r}")
    if min(steps, batch, input_size, hidden, layers, directions) <= 0:
        raise ValueError("steps, batch, input_size, hidden, layers and directions must be > 0")
    g = GATES[cell] * hidden
    es = ELEMENT_BYTES.get(dtype, 4)
    name = f"cudnn.{cell}"
    tb = steps * batch
    out: list[Operator] = []

    def gemm(m: int, n: int, k: int, op: str, count: int) -> None:
        out.append(
            Operator(
                "linear",
                phase,
                name,
                {"B": 1, "M": m, "N": n, "K": k},
                dtype,
                op,
                2.0 * m * n * k,
                float((m * k + k * n + m * n) * es),
                count,
            )
        )

    def gates(op: str, count: int) -> None:
        numel = batch * g
        moved = (2 * g + 3 * hidden) * batch * es  # gates and c/h in, new c/h out
        out.append(
            Operator(
                "elementwise",
                phase,
                name,
                {"numel": numel, "inputs": 3},
                dtype,
                op,
                float(numel),
                float(moved),
                count,
            )
        )

    for layer in range(layers):
        width = input_size if layer == 0 else hidden * directions
        for _ in range(directions):
            if phase == "forward":
                gemm(tb, g, width, "input_projection", 1)
                gemm(batch, g, hidden, "recurrent", steps)
                gates(f"{cell}_cell", steps)
                continue
            gates(f"{cell}_cell_backward", steps)
            gemm(batch, hidden, g, "recurrent_data_grad", steps)
            if layer > 0 or input_grad:
                gemm(tb, width, g, "input_data_grad", 1)
            gemm(g, width, tb, "input_weight_grad", 1)
            gemm(g, hidden, tb, "recurrent_weight_grad", 1)
            if bias:
                out.append(
                    Operator(
                        "reduction",
                        phase,
                        name,
                        {"numel": tb * g, "out": g},
                        dtype,
                        "bias_grad",
                        float(tb * g),
                        float((tb * g + g) * es),
                    )
                )
        if dropout > 0 and layer < layers - 1:
            numel = tb * hidden * directions
            op = "dropout" if phase == "forward" else "dropout_backward"
            out.append(
                Operator(
                    "elementwise",
                    phase,
                    name,
                    {"numel": numel, "inputs": 1},
                    dtype,
                    op,
                    float(numel),
                    float(numel * (2 * es + 1)),
                )
            )
    return out
