"""The time of one all-reduce of ``message_bytes`` over ``n`` devices of one link (issue #47).

NCCL's figures are reported as *bus bandwidth* (nccl-tests ``doc/PERFORMANCE.md``): a ring
all-reduce moves ``2 (n-1)/n`` times the message over every device's link, so
``busbw = algbw x 2 (n-1)/n`` is the same for any ``n`` on a flat link. Its time is a latency
plus the bus traffic over the achieved bus bandwidth (the alpha-beta model)::

    t(S, n) = latency(n) + 2 (n-1)/n x S / busbw_max
    busbw(S, n) = 2 (n-1)/n x S / t(S, n)       # grows with S, saturates at busbw_max

``latency(n) = base + per_device x (n-1)`` (a ring's steps grow with ``n``). The constants
(``constants.ALLREDUCE_LATENCY_S``, ``constants.LINK_EFFICIENCY``) and the published
nccl-tests rows they are checked on are in ``benchmarks/data/nccl-allreduce/``. This module is
what other modules compose (the cross-node collective of ``timing/nodes.py``): it takes only
bytes, a device count and a ``Link``.
"""

from __future__ import annotations

from dataclasses import dataclass

from advisor.prediction.timing import constants as C


@dataclass(frozen=True)
class Link:
    """The link between the devices of one machine: achieved large-message bus bandwidth
    (bytes/s), its kind, and how many devices share one link to the host (a K80 board: 2)."""

    bytes_per_s: float
    kind: str
    devices_per_link: int = 1
    source: str = ""
    # (base, per extra device) seconds; None: ``constants.ALLREDUCE_LATENCY_S`` of ``kind``
    # (a link of another kind, e.g. a network between nodes, brings its own)
    latency_s: tuple[float, float] | None = None

    @property
    def shared_board(self) -> bool:
        return self.devices_per_link > 1


def link_from(nominal_gbs: float, kind: str, devices_per_link: int = 1, source: str = "") -> Link:
    """A link of ``nominal_gbs`` (per direction) at the achieved share of its kind."""
    return Link(nominal_gbs * 1e9 * C.LINK_EFFICIENCY[kind], kind, devices_per_link, source)


def latency(n: int, link: Link) -> float:
    """Seconds of one small all-reduce over ``n`` devices (no bytes to speak of)."""
    base, per_device = link.latency_s or C.ALLREDUCE_LATENCY_S[link.kind]
    return base + per_device * (n - 1)


def allreduce_seconds(message_bytes: float, n: int, link: Link) -> float:
    """Seconds of one ring all-reduce of ``message_bytes`` over ``n`` devices of ``link``."""
    if n <= 1 or message_bytes <= 0:
        return 0.0
    return latency(n, link) + 2 * (n - 1) / n * message_bytes / link.bytes_per_s


def bus_bandwidth(message_bytes: float, n: int, link: Link) -> float:
    """nccl-tests' bus bandwidth (bytes/s) the model gives for one message size."""
    t = allreduce_seconds(message_bytes, n, link)
    return 2 * (n - 1) / n * message_bytes / t if t > 0 else 0.0


def bucketed_seconds(total_bytes: float, buckets: int, n: int, link: Link) -> float:
    """Seconds of one all-reduce per bucket, run one after the other, for ``buckets``
    non-empty buckets holding ``total_bytes`` in all: a latency each and the bytes once over
    the bus, whatever the split (the sum of :func:`allreduce_seconds` over the buckets, in
    closed form: a 13B model's gradients are 2,000 of DDP's buckets)."""
    if n <= 1 or total_bytes <= 0 or buckets <= 0:
        return 0.0
    return buckets * latency(n, link) + 2 * (n - 1) / n * total_bytes / link.bytes_per_s
