"""Issue #47: each machine's intra-node links, from the catalog's topology data (sourced)."""

from __future__ import annotations

import pytest
from advisor.providers.catalog import load
from advisor.providers.catalog.topology import topology

CAT = load()


@pytest.mark.parametrize(
    ("key", "link", "per_link"),
    [
        ("ec2:p2.8xlarge", "pcie", 2),  # four K80 boards, two dies behind each host link
        ("ec2:p3.16xlarge", "nvlink", 1),
        ("compute-engine:n1-standard-32+4xP100", "pcie", 1),
        ("ec2:g5.12xlarge", "pcie", 1),
        ("ec2:p4d.24xlarge", "nvlink", 1),  # no row: the A100 spec's NVLink
    ],
)
def test_machines_take_their_published_topology(key: str, link: str, per_link: int) -> None:
    m = CAT.get(key)
    top = topology(m.provider, m.instance_type, m.accelerator, CAT.accelerator(m.accelerator))
    assert (top.link, top.devices_per_link) == (link, per_link)
    assert top.source
