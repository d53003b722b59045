"""The published memory calculators and advisor beside the measured fine-tuning steps (issue
#48, section 3).

The measured rows are ``benchmarks/fine_tuning.py --device cuda``'s (default: the H200's,
``docs/data/h200-2026-11-28/ft_rescored.json``): the allocator's peak of the step
``advisor.train`` runs (``torch.cuda.max_memory_allocated``). Beside each:

- advisor's prediction by the model as it is now (``plan_conformance.predicted``, ``upper``,
  for the row's GPU generation);
- fm-training-estimator's, DeepSpeed's and accelerate's figures for the same model, method,
  batch, sequence length and precision, computed by each tool's own code
  (``benchmarks/calculators_run.py``, which says what each counts) in the calculators' own
  environment: fm-training-estimator needs transformers < 4.51 (``OptimizerNames.ADAMW_HF``),
  so the tools run in a child process whose ``PYTHONPATH`` is ``--calculators``.

None of the four counts the CUDA context (outside the allocator, about 0.5 GiB), so each is
read against the allocator's peak. DeepSpeed's figure is model states only, a floor by design.

The calculators are not advisor's dependencies; install them in a folder of their own (with
the project's environment active: DeepSpeed's source package builds against its torch):

    DS_BUILD_OPS=0 pip install --no-deps --no-build-isolation --target /tmp/calc \\
        fm-training-estimator==0.1.0 deepspeed==0.19.8 \\
        transformers==4.49.0 huggingface_hub==0.36.0 tokenizers==0.21.4 dataclass-wizard \\
        fire xgboost-cpu==3.2.0 hjson ninja py-cpuinfo msgpack einops
    python benchmarks/calculators.py --calculators /tmp/calc [--rows FILE] [--json FILE]

(fm-training-estimator 0.1.0: 0.1.1 to 0.1.3 import ``orchestrator`` from ado-core, which
ado-core 2.x no longer has; their memory estimators are the same code as 0.1.0's.)
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

ROOT = Path(__file__).resolve().parent.parent
ROWS = ROOT / "docs/data/h200-2026-11-28/ft_rescored.json"
TOOLS = ("fm-training-estimator", "deepspeed", "accelerate")
MIB = 2**20


def config_dir(config: str, folder: Path) -> str:
    """A folder holding ``config``'s ``config.json`` (advisor's own ``config_of``) and a
    one-word tokenizer (fm-training-estimator loads one, and reads its ``model_max_length``
    only when the config has no context length), as a calculator reads a model from the Hub."""
    from advisor.search_spaces.hf.build import config_of
    from advisor.search_spaces.hf.ref import parse
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from transformers import PreTrainedTokenizerFast

    ref = parse(config)
    where = folder / hashlib.sha1(config.encode()).hexdigest()[:12]
    if not where.exists():
        config_of(ref).save_pretrained(where)
        words = Tokenizer(WordLevel({"[UNK]": 0}, unk_token="[UNK]"))
        tokenizer = PreTrainedTokenizerFast(tokenizer_object=words, model_max_length=ref.seq_len)
        tokenizer.save_pretrained(where)
        saved = where / "tokenizer_config.json"  # a class transformers 4 knows too
        fields = json.loads(saved.read_text()) | {"tokenizer_class": "PreTrainedTokenizerFast"}
        saved.write_text(json.dumps(fields))
    return str(where)


def case_of(i: int, row: dict[str, Any], folder: Path) -> dict[str, Any]:
    from advisor.search_spaces.hf.methods import LORA_DROPOUT
    from advisor.search_spaces.hf.ref import parse

    ref = parse(f"{row['config']},method={row['method']}")
    rank = int(ref.options.get("rank", 16))
    return {
        "id": i, "config_dir": config_dir(row["config"], folder), "method": row["method"],
        "rank": rank, "alpha": int(ref.options.get("alpha", 2 * rank)),
        "dropout": LORA_DROPOUT, "batch": row["batch"], "seq_len": ref.seq_len,
        "precision": "bf16" if "bf16" in row["plan"] else "fp32",
    }  # fmt: skip


def calculators(cases: list[dict[str, Any]], path: str, folder: Path) -> tuple[dict, dict]:
    """Each case's figures from ``calculators_run.py`` run with ``path`` on ``PYTHONPATH``."""
    file = folder / "cases.json"
    file.write_text(json.dumps(cases))
    env = {**os.environ, "PYTHONPATH": path, "USE_TF": "0", "USE_TORCH": "1"}
    script = Path(__file__).resolve().parent / "calculators_run.py"
    out = subprocess.run([sys.executable, str(script), str(file)], env=env, cwd=folder,
                         capture_output=True, text=True, check=True).stdout  # fmt: skip
    lines = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    return lines[0]["versions"], {line["case"]: line for line in lines[1:]}


def ours(row: dict[str, Any]) -> tuple[float, float]:
    """advisor's prediction and upper estimate (bytes) for ``row``, by the model as it is now."""
    from plan_conformance import predicted, upper

    workload = f"{row['config']},method={row['method']}"
    plan = "" if row["plan"] == "fp32" else row["plan"]
    generation = row.get("generation")
    pred = predicted(workload, {}, row["batch"], plan, 1, "cuda", generation)
    return pred, upper(workload, {}, pred, "cuda", generation)


def summary(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per tool: cases it has a figure for, median |error|, worst error, cases under."""
    out = []
    for tool in ("advisor", "advisor upper", *TOOLS):
        errors = [r["errors"][tool] for r in rows if tool in r["errors"]]
        if not errors:
            continue
        out.append({
            "tool": tool, "cases": len(errors),
            "median_abs_error": statistics.median(abs(e) for e in errors),
            "worst_under": min(errors), "worst_over": max(errors),
            "under": sum(e < 0 for e in errors),
        })  # fmt: skip
    return out


def markdown(rows: list[dict[str, Any]], versions: dict[str, Any]) -> str:
    said = ", ".join(f"{k} {v}" for k, v in versions.items())
    lines = [
        f"Tools: {said}.", "",
        "| tool | cases | median abs error | worst under | worst over | under the measured |",
        "|---|---|---|---|---|---|",
    ]  # fmt: skip
    for s in summary(rows):
        lines.append(f"| {s['tool']} | {s['cases']} | {s['median_abs_error']:.1%} | "
                     f"{s['worst_under']:+.1%} | {s['worst_over']:+.1%} | {s['under']} |")  # fmt: skip
    head = " | ".join(("advisor", *TOOLS))
    lines += ["", f"| config | method | plan | batch | measured MiB | {head} |",
              "|---|---|---|---|---|" + "---|" * (1 + len(TOOLS))]  # fmt: skip
    for r in rows:
        cells = []
        for tool in ("advisor", *TOOLS):
            mib = r["mib"].get(tool)
            cells.append("-" if mib is None else f"{mib:,.0f} ({r['errors'][tool]:+.0%})")
        lines.append(f"| {r['config'][3:].split(',')[0]} | {r['method']} | {r['plan']} | "
                     f"{r['batch']} | {r['measured_mib']:,.0f} | " + " | ".join(cells) + " |")  # fmt: skip
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calculators", required=True,
                        help="the folder the calculators are installed in (pip --target)")  # fmt: skip
    parser.add_argument("--rows", type=Path, default=ROWS, help="fine_tuning.py's measured rows")
    parser.add_argument("--json", type=Path, default=None, help="write the rows here")
    args = parser.parse_args(argv)
    if not Path(args.calculators).is_dir():
        parser.error(f"--calculators {args.calculators}: no such folder (see the docstring)")
    measured = json.loads(args.rows.read_text())["rows"]
    with tempfile.TemporaryDirectory() as tmp:
        cases = [case_of(i, r, Path(tmp)) for i, r in enumerate(measured)]
        versions, figures = calculators(cases, args.calculators, Path(tmp))
    rows = []
    for i, r in enumerate(measured):
        pred, top = ours(r)
        found = {"advisor": pred, "advisor upper": top}
        found |= {t: figures[i][t] for t in TOOLS if isinstance(figures[i][t], float)}
        meas = r["measured_mib"] * MIB
        row = {k: r[k] for k in ("config", "method", "plan", "batch", "measured_mib")}
        row |= {"gpu": r.get("gpu"), "mib": {k: v / MIB for k, v in found.items()},
                "errors": {k: v / meas - 1 for k, v in found.items()},
                "missing": {t: figures[i][t] for t in TOOLS if t not in found}}  # fmt: skip
        print(json.dumps(row), flush=True)
        rows.append(row)
    print(markdown(rows, versions))
    if args.json:
        args.json.write_text(json.dumps({"versions": versions, "rows": rows,
                                         "summary": summary(rows)}, indent=1))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
