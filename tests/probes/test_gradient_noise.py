"""The gradient noise scale estimator on synthetic gradients whose noise scale is known."""

from __future__ import annotations

import math

import numpy as np
import pytest
from advisor.probes.gradient_noise import (
    NoiseScale,
    estimate_noise_scale,
    estimate_pooled,
    from_probe,
    per_iteration_estimates,
)


def known_noise(d: int, true_b: float) -> tuple[np.ndarray, float]:
    """A true gradient ``G`` of ``d`` dimensions with ``|G|^2 = 1`` and the per-sample noise
    ``sigma`` that makes the noise scale ``tr(Sigma) / |G|^2 = d sigma^2`` equal ``true_b``."""
    return np.full(d, 1.0 / math.sqrt(d)), math.sqrt(true_b / d)


def synthetic_norms(
    g: np.ndarray, sigma: float, b_small: int, iterations: int, rng: np.random.Generator
) -> tuple[list[float], list[float]]:
    """Squared norms of two half-batch mean gradients (each ``G + N(0, sigma^2 I / b_small)``)
    and of their mean, as the probe measures them, for ``iterations`` batches."""
    small, big = [], []
    for _ in range(iterations):
        h1 = g + rng.normal(0.0, sigma / math.sqrt(b_small), size=g.shape)
        h2 = g + rng.normal(0.0, sigma / math.sqrt(b_small), size=g.shape)
        small.append(float((h1 @ h1 + h2 @ h2) / 2))
        mean = (h1 + h2) / 2
        big.append(float(mean @ mean))
    return small, big


@pytest.mark.parametrize("true_b", [20.0, 300.0, 3000.0])
def test_estimate_recovers_known_noise_scale(true_b: float) -> None:
    rng = np.random.default_rng(1)
    g, sigma = known_noise(400, true_b)
    small, big = synthetic_norms(g, sigma, 64, 400, rng)
    est = estimate_noise_scale(small, big, 64, 128)
    assert est.value == pytest.approx(true_b, rel=0.15)
    assert est.low <= true_b <= est.high
    assert est.g2 == pytest.approx(1.0, rel=0.15)
    assert est.trace_sigma == pytest.approx(true_b, rel=0.1)


def test_interval_covers_the_true_value_at_about_its_confidence() -> None:
    rng = np.random.default_rng(7)
    d, true_b = 50, 200.0
    g, sigma = known_noise(d, true_b)
    covered, widths = 0, []
    for seed in range(60):
        small, big = synthetic_norms(g, sigma, 128, 8, rng)  # a probe's 8 batches
        est = estimate_noise_scale(small, big, 128, 256, n_boot=500, seed=seed)
        covered += est.low <= true_b <= est.high
        widths.append(est.high / max(est.low, 1e-9))
    assert covered >= 0.75 * 60  # nominal 90 %; the bootstrap on 8 points runs a bit narrow
    assert np.median(widths) > 1.2  # 8 batches cannot pin it down tightly: it says so


def test_per_iteration_estimates_are_exact_on_noise_free_norms() -> None:
    # E|g_B|^2 = |G|^2 + tr(Sigma)/B exactly: |G|^2 = 2, tr(Sigma) = 64
    b_s, b_b = 32, 64
    small = [2 + 64 / b_s] * 3
    big = [2 + 64 / b_b] * 3
    g2, trace = per_iteration_estimates(small, big, b_s, b_b)
    assert np.allclose(g2, 2.0)
    assert np.allclose(trace, 64.0)
    est = estimate_noise_scale(small, big, b_s, b_b)
    assert est.value == pytest.approx(32.0)
    assert est.low == pytest.approx(32.0) and est.high == pytest.approx(32.0)


def test_pure_noise_is_unresolved_with_a_finite_lower_bound() -> None:
    rng = np.random.default_rng(3)
    d = 100
    small, big = synthetic_norms(np.zeros(d), 1.0, 16, 8, rng)  # |G| = 0: B_simple = inf
    est = estimate_noise_scale(small, big, 16, 32)
    assert est.high == math.inf
    assert est.low > 0
    if not est.resolved:
        assert est.value == math.inf
    back = NoiseScale.from_dict(est.to_dict())  # JSON round trip keeps infinity
    assert back == est


def test_bad_inputs_are_rejected() -> None:
    with pytest.raises(ValueError, match="b_small < b_big"):
        estimate_noise_scale([1.0, 2.0], [1.0, 2.0], 64, 64)
    with pytest.raises(ValueError, match="equally long"):
        estimate_noise_scale([1.0, 2.0], [1.0], 32, 64)


def test_torch_estimator_on_a_model_with_known_gradient_noise() -> None:
    torch = pytest.importorskip("torch")
    from advisor.probes.gradient_noise_frameworks import torch_gradient_noise

    torch.manual_seed(0)
    d, sigma = 64, 2.0
    mu = torch.zeros(d)
    w = torch.full((d,), 0.5)  # |G|^2 = |w - mu|^2 = 16, tr(Sigma) = d sigma^2 = 256

    class Offset(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w = torch.nn.Parameter(w.clone())

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.w - x

    def loss_fn(out: torch.Tensor, _y: torch.Tensor) -> torch.Tensor:
        return 0.5 * out.square().sum(dim=1).mean()  # gradient: w - mean(x)

    batches = [(mu + sigma * torch.randn(256, d), torch.zeros(256)) for _ in range(200)]
    model = Offset()
    est = torch_gradient_noise(model, loss_fn, iter(batches), max_batches=200)
    assert est is not None
    # 8 micro-batches of 32 per batch, every pair over all 200 x 256 samples
    assert (est.small_batch, est.big_batch, est.iterations) == (32, 200 * 256, 200)
    assert est.value == pytest.approx(256 / 16, rel=0.15)
    assert est.low <= 16 <= est.high
    assert model.w.grad is None  # leaves no gradient behind
    assert torch.equal(model.w.detach(), w)  # and takes no step


def test_torch_estimator_needs_two_batches() -> None:
    torch = pytest.importorskip("torch")
    from advisor.probes.gradient_noise_frameworks import torch_gradient_noise

    model = torch.nn.Linear(3, 1)
    one = [(torch.randn(8, 3), torch.randn(8, 1))]
    assert torch_gradient_noise(model, torch.nn.functional.mse_loss, iter(one)) is None


def test_from_probe_reads_the_result_field() -> None:
    from advisor.probes.result import ProbeResult

    est = estimate_noise_scale([3.0, 3.1], [2.5, 2.4], 32, 64)
    probe = ProbeResult(
        workload="fcn",
        framework="torch",
        batch_size=64,
        device="cpu",
        threads=1,
        iteration_s=(0.1, 0.1),
        gradient_noise=est.to_dict(),
    )
    again = ProbeResult.from_json(probe.to_json())
    assert from_probe(again) == est
    assert from_probe(ProbeResult.from_dict({**probe.to_dict(), "gradient_noise": None})) is None


@pytest.mark.slow
def test_keras_estimator_on_a_model_with_known_gradient_noise() -> None:
    tf = pytest.importorskip("tensorflow")
    keras = pytest.importorskip("keras")
    from advisor.probes.gradient_noise_frameworks import keras_gradient_noise

    d, sigma = 32, 2.0

    class Offset(keras.layers.Layer):
        def build(self, input_shape: object) -> None:
            self.w = self.add_weight(shape=(d,), initializer=keras.initializers.Constant(0.5))

        def call(self, x: object) -> object:
            return self.w - x

    model = keras.Sequential([keras.Input((d,)), Offset()])

    def loss_fn(_y: object, out: object) -> object:
        return 0.5 * tf.reduce_mean(tf.reduce_sum(tf.square(out), axis=1))

    rng = np.random.default_rng(0)
    batches = [
        (tf.constant(sigma * rng.standard_normal((128, d)), tf.float32), tf.zeros((128,)))
        for _ in range(150)
    ]
    est = keras_gradient_noise(model, loss_fn, iter(batches), max_batches=150)
    assert est is not None
    # |G|^2 = d * 0.25 = 8, tr(Sigma) = d sigma^2 = 128: B_simple = 16
    assert est.value == pytest.approx(16.0, rel=0.15)
    assert est.low <= 16 <= est.high


def test_torch_estimator_time_box_keeps_three_batches() -> None:
    torch = pytest.importorskip("torch")
    from advisor.probes.gradient_noise import MIN_NOISE_BATCHES
    from advisor.probes.gradient_noise_frameworks import torch_gradient_noise

    model = torch.nn.Linear(3, 1)
    batches = [(torch.randn(8, 3), torch.randn(8, 1)) for _ in range(10)]
    est = torch_gradient_noise(model, torch.nn.functional.mse_loss, iter(batches), max_seconds=0.0)
    assert est is not None and est.iterations == MIN_NOISE_BATCHES


def pooled_inputs(chunks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(gram of the groups' sums, each group's sum of squared norms) from micro-batch mean
    gradients ``chunks[group, micro-batch, parameter]``, as the probe accumulates them."""
    sums = chunks.sum(axis=1)
    return sums @ sums.T, np.einsum("gcp,gcp->g", chunks, chunks)


def synthetic_chunks(
    g: np.ndarray, sigma: float, size: int, groups: int, chunks: int, rng: np.random.Generator
) -> np.ndarray:
    """Micro-batch mean gradients ``G + N(0, sigma^2 I / size)`` (tr(Sigma) = d sigma^2)."""
    noise = rng.normal(0.0, sigma / math.sqrt(size), size=(groups, chunks, len(g)))
    return g + noise


def test_pooled_is_exact_on_noise_with_known_geometry() -> None:
    # Orthogonal noise vectors, orthogonal to G: every pair's dot product is |G|^2 exactly and
    # every |g_c|^2 = |G|^2 + s^2, so |G|^2 = 4 and tr(Sigma) = size s^2 = 32 x 9 exactly.
    groups, chunks, size = 3, 4, 32
    d = 1 + groups * chunks
    g = np.zeros(d)
    g[0] = 2.0
    x = np.tile(g, (groups, chunks, 1))
    for i in range(groups * chunks):
        x[i // chunks, i % chunks, 1 + i] = 3.0
    est = estimate_pooled(*pooled_inputs(x), chunks, size)
    assert est.g2 == pytest.approx(4.0)
    assert est.trace_sigma == pytest.approx(size * 9.0)
    assert est.value == pytest.approx(size * 9.0 / 4.0)
    assert (est.small_batch, est.big_batch, est.iterations) == (32, 32 * 12, 3)


@pytest.mark.parametrize("true_b", [20.0, 300.0, 3000.0])
def test_pooled_recovers_known_noise_scale(true_b: float) -> None:
    rng = np.random.default_rng(1)
    g, sigma = known_noise(400, true_b)
    est = estimate_pooled(*pooled_inputs(synthetic_chunks(g, sigma, 32, 50, 8, rng)), 8, 32)
    assert est.value == pytest.approx(true_b, rel=0.15)
    assert est.low <= true_b <= est.high
    assert est.trace_sigma == pytest.approx(true_b, rel=0.1)


def test_pooled_interval_covers_the_true_value_at_about_its_confidence() -> None:
    rng = np.random.default_rng(7)
    d, true_b = 50, 2000.0  # far above the batch: the hard case for |G|^2
    g, sigma = known_noise(d, true_b)
    covered = 0
    for seed in range(60):
        x = synthetic_chunks(g, sigma, 32, 16, 8, rng)  # a probe's 16 batches of 256
        est = estimate_pooled(*pooled_inputs(x), 8, 32, n_boot=500, seed=seed)
        covered += est.low <= true_b <= est.high
    assert covered >= 0.75 * 60  # nominal 90 %


def test_pooled_has_less_spread_than_halves_on_the_same_samples() -> None:
    # The same 16 batches of 256: two halves per batch, averaged per batch (the first
    # version), against every pair of micro-batches over all of them (the pooled one).
    rng = np.random.default_rng(11)
    d, true_b, size, chunks, groups = 50, 2000.0, 32, 8, 16
    g, sigma = known_noise(d, true_b)
    halves, pooled = [], []
    for _ in range(200):
        x = synthetic_chunks(g, sigma, size, groups, chunks, rng)
        h1, h2 = x[:, :4].mean(axis=1), x[:, 4:].mean(axis=1)
        small = ((h1 * h1).sum(axis=1) + (h2 * h2).sum(axis=1)) / 2
        big = (((h1 + h2) / 2) ** 2).sum(axis=1)
        halves.append(estimate_noise_scale(small, big, 128, 256, n_boot=10).g2)
        pooled.append(estimate_pooled(*pooled_inputs(x), chunks, size, n_boot=10).g2)
    assert np.mean(pooled) == pytest.approx(1.0, abs=0.1)  # both unbiased for |G|^2 = 1
    assert np.mean(halves) == pytest.approx(1.0, abs=0.2)
    # Var |G|^2: the pair term d (sigma^2/b)^2 over the pairs used (~N^2 against N B / 2:
    # 30x smaller here) plus 4 G.Sigma.G / N, the same for both: std 0.22 against 0.59
    assert np.std(pooled) < np.std(halves) / 2


def test_pooled_pure_noise_is_unresolved_and_bad_inputs_rejected() -> None:
    rng = np.random.default_rng(3)
    x = synthetic_chunks(np.zeros(100), 1.0, 16, 8, 4, rng)
    gram, sq = pooled_inputs(x)
    gram[:] = np.diag(np.diag(gram))  # no signal across groups: |G|^2 <= 0 for sure below
    sq[:] = np.diag(gram) * 2
    est = estimate_pooled(gram, sq, 4, 16)
    assert est.value == math.inf and est.high == math.inf
    with pytest.raises(ValueError, match="n x n gram"):
        estimate_pooled(np.ones((2, 3)), np.ones(2), 4, 16)
    with pytest.raises(ValueError, match=">= 2 micro-batches"):
        estimate_pooled(np.ones((1, 1)), np.ones(1), 1, 16)


def test_kept_gradient_sums_are_capped_by_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    torch = pytest.importorskip("torch")
    from advisor.probes import gradient_noise_frameworks as gn

    model = torch.nn.Linear(100, 100)  # 10,100 parameters: 40,400 bytes per kept batch sum
    batches = [(torch.randn(16, 100), torch.randn(16, 100)) for _ in range(10)]
    mse = torch.nn.functional.mse_loss
    monkeypatch.setattr(gn, "NOISE_MEMORY", 5 * 4 * 10_100)  # room for 5 batches
    est = gn.torch_gradient_noise(model, mse, iter(batches), max_seconds=None)
    assert est is not None and est.iterations == 5
    monkeypatch.setattr(gn, "NOISE_MEMORY", 1)  # never fewer than the minimum
    est = gn.torch_gradient_noise(model, mse, iter(batches), max_seconds=None)
    assert est is not None and est.iterations == gn.MIN_NOISE_BATCHES


@pytest.mark.slow
def test_cli_probe_shows_the_pooled_noise_scale() -> None:
    pytest.importorskip("torch")
    from advisor.probes.result import ProbeResult
    from click.testing import CliRunner

    from advisor.cli.main import cli

    args = ["probe", "--model", "fcn", "--batch-size", "16", "--iterations", "4", "--threads", "1"]
    result = CliRunner().invoke(cli, [*args, "--json"])
    assert result.exit_code == 0, result.output
    noise = from_probe(ProbeResult.from_json(result.output.strip().splitlines()[-1]))
    assert noise is not None and noise.small_batch == 2  # 16 / 8 micro-batches
    table = CliRunner().invoke(cli, args, terminal_width=200)
    assert table.exit_code == 0 and "gradient noise scale" in table.output
    assert "micro-batches of 2 pooled" in table.output
