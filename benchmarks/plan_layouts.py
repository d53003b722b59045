"""How many plan layouts an ``advisor suggest`` screen asks the memory trace for (issue #46):
each layout (precision, one or more micro-steps, checkpointing, sharding and GPU count) is
seconds of fake-tensor tracing for a deep model, so the count is what a cold run pays, read
without the machine's load. The suggest runs in this process; the report's multi-machine
hint is left out (``--with-hint`` keeps it).

Run it twice on copies of one trace store (``ADVISOR_HOME``) that holds every layout, once
with another commit's plan search, to compare the two searches on the same traces:

    git show REV:advisor/prediction/forecast/plan_search.py > /tmp/old_plan_search.py
    ADVISOR_HOME=COPY1 python benchmarks/plan_layouts.py --plan-search /tmp/old_plan_search.py \\
        -- --model hf:meta-llama/Llama-3.1-8B --method lora --tokens 20000000 --budget 50
    ADVISOR_HOME=COPY2 python benchmarks/plan_layouts.py -- --model hf:meta-llama/Llama-3.1-8B ...
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from pathlib import Path
from typing import Any


def use_plan_search(file: Path) -> None:
    """``file`` imported as ``advisor.prediction.forecast.plan_search`` (before anything else
    imports that module)."""
    name = "advisor.prediction.forecast.plan_search"
    spec = importlib.util.spec_from_file_location(name, file)
    if spec is None or spec.loader is None:
        raise SystemExit(f"--plan-search {file}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--plan-search", type=Path, default=None,
                        help="another commit's plan_search.py to run instead of this one")  # fmt: skip
    parser.add_argument("--with-hint", action="store_true",
                        help="keep the report's multi-machine hint (more layouts)")  # fmt: skip
    parser.add_argument("suggest", nargs=argparse.REMAINDER,
                        help="-- then advisor suggest's arguments")  # fmt: skip
    args = parser.parse_args(argv)
    if args.plan_search:
        use_plan_search(args.plan_search)
    import advisor.prediction.memory.plan as memory_plan
    import advisor.study.more_nodes as more_nodes
    from advisor.cli.main import main as advisor

    asked: set[str] = set()
    traced: set[str] = set()
    lines = memory_plan._lines

    def counted(key: str, workload: str, hps: Any, plan: Any, devices: int, store: Any,
                rules: str, micro: int | None = None) -> Any:  # fmt: skip
        asked.add(key)
        getter = getattr(store, "get_data", None)
        if not isinstance(getter(key) if getter else None, dict):
            traced.add(key)
        return lines(key, workload, hps, plan, devices, store, rules, micro)

    memory_plan._lines = counted  # type: ignore[assignment]
    start = time.perf_counter()
    if not args.with_hint:
        more_nodes.more_nodes = lambda outcome, backend: []  # type: ignore[assignment]
    suggest = [a for a in args.suggest if a != "--"]
    code = 0
    try:
        result = advisor(["suggest", *suggest])
        code = result if isinstance(result, int) else 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    took = time.perf_counter() - start
    print(f"plan layouts asked: {len(asked)}; traced by this run: {len(traced)}; {took:.0f} s"
          f"{' (the hint left out)' if not args.with_hint else ''}", file=sys.stderr)  # fmt: skip
    return code


if __name__ == "__main__":
    sys.exit(main())
