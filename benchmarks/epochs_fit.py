"""How well the fitted epochs model predicts a known point it has not seen (issue #19).

For each workload with published epochs to stabilise (docs/method.md 2.3), every published point
is left out in turn, ``B_noise`` is fitted to the others (:func:`advisor.prediction.run.epochs_fit.
fit_noise_scale`), and the left-out batch size is predicted; then the same with only the two
end points (256 and 2048) known, predicting the two between. Prints one row per prediction
and the worst error; ``--json`` for the raw rows.

Run: ``python benchmarks/epochs_fit.py``.
"""

from __future__ import annotations

import argparse
import json
from itertools import combinations
from typing import Any

from advisor.search_spaces import workloads

from advisor.prediction.run.epochs_fit import fit_noise_scale


def predictions(known: dict[int, int], keep: int) -> list[dict[str, Any]]:
    """Every prediction of one point from ``keep`` of the others."""
    rows = []
    for subset in combinations(sorted(known), keep):
        fit = fit_noise_scale({b: known[b] for b in subset})
        for b in sorted(set(known) - set(subset)):
            value, low, high = fit.epochs_at(b)
            rows.append(
                {
                    "from": list(subset),
                    "batch": b,
                    "known": known[b],
                    "predicted": round(value, 2),
                    "interval": [round(low, 2), round(high, 2)],
                    "error": round(value / known[b] - 1, 4),
                    "b_noise": fit.value,
                    "covered": low <= known[b] <= high,
                }
            )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")
    args = parser.parse_args()
    out: dict[str, Any] = {}
    for name in workloads.names():
        known = workloads.get(name).epochs_to_stabilise
        if len(known) < 3:
            continue
        full = fit_noise_scale({b: float(e) for b, e in known.items()})
        out[name] = {
            "fit": {"b_noise": full.value, "low": full.low, "high": full.high},
            "leave_one_out": predictions(known, len(known) - 1),
            "from_two": predictions(known, 2),
        }
    if args.json:
        print(json.dumps(out, indent=1))
        return
    for name, res in out.items():
        f = res["fit"]
        print(
            f"{name}: B_noise fitted to all points {f['b_noise']:,.0f} ({f['low']:,.0f}-{f['high']:,.0f})"
        )
        for kind in ("leave_one_out", "from_two"):
            errs = [r["error"] for r in res[kind]]
            print(f"  {kind}: {len(errs)} predictions, error {min(errs):+.1%} to {max(errs):+.1%}")
            for r in res[kind]:
                print(
                    f"    from {r['from']}: batch {r['batch']} known {r['known']}, predicted "
                    f"{r['predicted']} ({r['interval'][0]}-{r['interval'][1]}) {r['error']:+.1%}"
                    f"{'' if r['covered'] else '  (outside the interval)'}"
                )


if __name__ == "__main__":
    main()
