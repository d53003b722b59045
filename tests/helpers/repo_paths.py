"""Where things are, for tests that read files of the repository or hand a folder of user
models to a child process (so a test does not count its own depth in the tree)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

HELPERS = Path(__file__).resolve().parent  # tests/helpers: user models, fakes, tables
ROOT = HELPERS.parents[1]  # the repository
BENCHMARKS = ROOT / "benchmarks"


def load_benchmark(name: str) -> ModuleType:
    """``benchmarks/<name>.py`` imported as module ``name`` (registered, so that the benchmark's
    own ``from <sibling> import ...`` and dataclasses find it)."""
    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module
