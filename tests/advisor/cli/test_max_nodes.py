"""Issue #49: ``advisor suggest --max-nodes N``. The flag is checked in one line; its default
(1) leaves the answer and the study as they were (replay tables, no probe); a back end that
models several machines (the real scorer on fake probes, tests/advisor/test_max_nodes_study.py)
adds 2, 4, 8... machines of the networked types."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from advisor.providers.catalog import MachineKey

from advisor.errors import AdvisorError
from advisor.evaluation.candidates import Candidate, node_counts
from advisor.options import SuggestOptions

from .conftest import Replay, one_line_error, run


@pytest.mark.parametrize("bad", ["0", "65", "2.5", "many"])
def test_max_nodes_out_of_range_is_one_line(replay: Replay, bad: str) -> None:
    line = one_line_error(run(*replay.args("--max-nodes", bad)))
    assert "--max-nodes" in line


@pytest.mark.parametrize("bad", [0, 65, True, 2.0])
def test_python_api_checks_max_nodes(bad: object) -> None:
    with pytest.raises(AdvisorError, match="--max-nodes must be a whole number from 1 to 64"):
        SuggestOptions(model="fcn", max_nodes=bad)  # type: ignore[arg-type]


def test_default_answer_is_unchanged_by_max_nodes_1(replay: Replay, tmp_path: Path) -> None:
    answers = []
    for i, extra in enumerate(((), ("--max-nodes", "1"))):
        store = f"sqlite:///{tmp_path / f'{i}.db'}"
        out = run(*replay.args("--budget", "5", "--json", "--storage", store, *extra))
        assert out.code == 0, out.err
        answers.append(json.loads(out.out))
    a, b = answers
    assert a["study"] == b["study"]  # the same question: the same study name
    assert a["recommended"]["machine"] == b["recommended"]["machine"]
    assert a["recommended"]["batch_size"] == b["recommended"]["batch_size"]
    assert a["recommended"]["runtime_s"] == b["recommended"]["runtime_s"]
    assert a["recommended"]["nodes"] == 1 and a["nodes"] is None  # replay models no nodes
    assert [r["machine"] for r in a["ranking"]] == [r["machine"] for r in b["ranking"]]


def test_keys_and_candidates_on_several_machines() -> None:
    key = MachineKey("ec2:p4d.24xlarge:x4:spot")
    assert (key.nodes, key.spot, key.base, key.instance_type) == (4, True, "ec2:p4d.24xlarge",
                                                                  "p4d.24xlarge")  # fmt: skip
    assert MachineKey("ec2:p4d.24xlarge").nodes == 1
    assert MachineKey.of("ec2:p4d.24xlarge", True, 8) == "ec2:p4d.24xlarge:x8:spot"
    assert node_counts(1) == [1] and node_counts(12) == [1, 2, 4, 8]
    from advisor.providers.catalog import load

    inst = next(i for i in load().instances if i.key == "ec2:p4d.24xlarge")
    four = Candidate(inst, nodes=4)
    assert four.key == "ec2:p4d.24xlarge:x4"
    assert four.price_per_hour == pytest.approx(4 * inst.on_demand_usd_per_h)
