"""One `advisor suggest` process for the concurrency test: the real pipeline (screen over the
real catalog, performance model, calibration ledger, trial loop, report) on the default
storage of $ADVISOR_HOME, with local probes replaced by fixed timings (no torch), so that a
round takes seconds. Run as ``python suggest_with_fake_probes.py time|pareto ROUNDS``; each
round is a study of its own (another budget or probe budget)."""

from __future__ import annotations

import sys

from advisor.probes.result import ProbeRequest, ProbeResult

from advisor.config import default_storage_url
from advisor.evaluation.local import LocalBackend
from advisor.options import SuggestOptions
from advisor.pipeline import suggest

# issue #26: a probe made ready for prediction (its operator trace and loader time), so
# no trace is taken here (no torch import)
TRACE = {"data_s": 0.004}


def probe(request: ProbeRequest) -> ProbeResult:
    """Fixed, plausible timings: 0.1 s per 256 samples, a slow first step."""
    step = 0.1 * request.batch_size / 256
    return ProbeResult(
        workload="fcn", framework="torch", batch_size=request.batch_size, device="cpu",
        threads=1, init_s=1.0, iteration_s=(step * 5, *([step] * 7)), validation_s=(0.2, 0.1),
        validation_samples_measured=212, n_train=40_512, n_val=212, wall_s=3.0,
        fingerprint=dict(TRACE),
    )  # fmt: skip


def main(kind: str, rounds: int) -> None:
    for i in range(rounds):
        if kind == "time":
            fields: dict[str, object] = {"budget_usd": 5.0 + i}
        else:
            fields = {"objective": "pareto", "probe_budget_usd": 1.0 + i}
        options = SuggestOptions(model="fcn", trials=20, **fields)  # type: ignore[arg-type]
        report = suggest(options, backend=LocalBackend(default_storage_url(), run_probe=probe))
        assert report["recommended"] is not None
    print(f"{kind}: {rounds} studies")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
