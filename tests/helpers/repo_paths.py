"""Where things are, for tests that read files of the repository or hand a folder of user
models to a child process (so a test does not count its own depth in the tree)."""

from __future__ import annotations

from pathlib import Path

HELPERS = Path(__file__).resolve().parent  # tests/helpers: user models, fakes, tables
ROOT = HELPERS.parents[1]  # the repository
