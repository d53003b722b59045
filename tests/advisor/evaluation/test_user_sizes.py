"""Issue #46: a user model's dataset sizes are built once and kept in the advisor's folder
while its module file is unchanged, so a resumed ``advisor suggest`` starts no worker."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from advisor.evaluation import user_sizes

BUILDER = """
import pathlib
import torch
from torch.utils.data import TensorDataset


def build(batch_size=32, **_):
    with open(pathlib.Path(__file__).with_name("built.txt"), "a") as f:
        f.write("built\\n")
    model = torch.nn.Linear(4, 2)
    data = TensorDataset(torch.zeros(N, 4), torch.zeros(N, dtype=torch.long))
    return (model, torch.nn.CrossEntropyLoss(), torch.optim.SGD(model.parameters(), lr=0.1),
            data, TensorDataset(torch.zeros(7, 4), torch.zeros(7, dtype=torch.long)))
"""


@pytest.mark.slow  # the isolated worker builds the model (torch imported there): about 10 s
def test_the_sizes_are_kept_while_the_module_is_unchanged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ADVISOR_HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    module = tmp_path / "sized_here.py"
    module.write_text("N = 40\n" + BUILDER)
    builds = tmp_path / "built.txt"

    def sizes() -> tuple[int | None, int | None]:
        user_sizes._cached.cache_clear()  # a new process: only the folder remembers
        found = user_sizes.builder_sizes("sized_here:build")
        return found.n_train, found.n_val

    assert sizes() == (40, 7)
    assert sizes() == (40, 7)
    assert builds.read_text().count("built") == 1  # the second read came from the folder
    os.utime(module, ns=(1, 1))  # changed: another modification time
    sizes()  # (the worker of this process has the module imported: the same figures)
    assert builds.read_text().count("built") == 2  # built again
