"""Several machines joined by the cloud's network (issue #49): the collective across machines,
the start-up of N machines, the spot risk of N, and what each plan sends per step.

**Hierarchical all-reduce** (NCCL's tree/ring over nodes, Horovod's hierarchical all-reduce):
``g`` GPUs per machine, ``N`` machines, gradient bytes ``G``::

    inside  = buckets x collective.allreduce_seconds(G / buckets, g, link)  # issue #47's ring
    across  = 2 (N-1)/N * G / net   + 2 (N-1) * lat * buckets     # all-reduce of the shards

Inside a machine each GPU reduce-scatters to a 1/g shard over NVLink/PCIe (``link``: the
intra-node figure ``accel.link_of`` uses) and all-gathers it back; across machines the g shards
are all-reduced in parallel over the machine's NICs, so each machine sends ``2 (N-1)/N * G`` in
all at ``net`` bytes/s (``providers.network``: the cloud's published Gbps x the fabric's
achieved share, a prior) with the fabric's latency (a prior) per message. The two terms add
(no overlap assumed: the upper of the two schedules NCCL picks between).

**What each plan sends**: the traffic factor of the plan's sharding (``accel.SHARDING_TRAFFIC``:
ZeRO-3/FSDP gathers parameters again in backward, 1.5x) applies inside the machine; across
machines it applies too when FSDP shards over every process (``replicate=none``), and not under
HSDP (``replicate=nodes``: parameters gathered inside the machine only, gradients all-reduced
across machines once: 1x).

**Start-up** of N machines is the slowest of N draws of one machine's start-up, read as a
log-normal whose median is the value and whose 95th percentile is the upper bound: the median
of the maximum of N draws is the ``0.5 ** (1/N)`` quantile, its upper bound the
``0.95 ** (1/N)`` quantile. **Spot**: any one machine taken back stops the step for all, so
the interruption rate, and the expected restart overhead, is N times one machine's
(``providers.pricing.SPOT_RESTART_OVERHEAD``, a prior). **Price**: N machines at the hourly
price each.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from statistics import NormalDist
from typing import Any

from advisor.errors import AdvisorError
from advisor.intervals import Interval
from advisor.prediction.timing.collective import Link, allreduce_seconds
from advisor.providers.catalog import InstanceType
from advisor.providers.network import Network, network_of

P95 = NormalDist().inv_cdf(0.95)


@dataclass(frozen=True)
class Cluster:
    """``nodes`` machines of ``per_node`` GPUs each, joined by ``network``."""

    nodes: int
    per_node: int
    network: Network

    @property
    def devices(self) -> int:
        return self.nodes * self.per_node


def hierarchical_allreduce(
    gradient_bytes: float,
    cluster: Cluster,
    link: Link,
    buckets: int,
    traffic: float = 1.0,
    replicate: bool = False,
) -> dict[str, float]:
    """Seconds of one step's gradient synchronisation inside each machine and across machines
    (module docstring); ``traffic``: the plan's factor (``accel.SHARDING_TRAFFIC``), applied
    across machines only without ``replicate`` (HSDP)."""
    g, n = cluster.per_node, cluster.nodes
    inside = 0.0
    if g > 1:
        inside = buckets * allreduce_seconds(gradient_bytes / max(buckets, 1), g, link)
    across = 0.0
    if n > 1:
        net = cluster.network
        across = (
            2 * (n - 1) / n * gradient_bytes / net.bytes_per_s
            + 2 * (n - 1) * net.latency_s * buckets
        )
    return {"inside": traffic * inside, "across": (1.0 if replicate else traffic) * across}


def cluster_of(machine: InstanceType, nodes: int) -> Cluster:
    """``nodes`` machines of ``machine``'s type; an error where no network figure is cited."""
    network = network_of(machine.provider, machine.instance_type)
    if network is None:
        raise AdvisorError(
            f"{machine.key} has no cited network figure between machines.",
            "run it on one machine (--nodes 1), or pick a type listed in "
            "providers/catalog/data/network.csv (EFA, InfiniBand, GPUDirect machines).",
        )
    return Cluster(nodes, max(machine.accelerator_count, 1), network)


def across_machines(
    parts: dict[str, float],
    gradient_bytes: float,
    machine: InstanceType,
    nodes: int,
    link: Link,
    buckets: int,
    traffic: float,
    replicate: bool,
) -> dict[str, float]:
    """An iteration's parts (``accel.iteration_parts`` over every GPU of every machine) with
    the one-machine ring all-reduce replaced by the hierarchical one, its two terms kept as
    ``allreduce_inside`` and ``allreduce_across``."""
    cluster = cluster_of(machine, nodes)
    terms = hierarchical_allreduce(gradient_bytes, cluster, link, buckets,
                                   traffic, replicate)  # fmt: skip
    return {
        **parts,
        "allreduce": terms["inside"] + terms["across"],
        "allreduce_inside": terms["inside"],
        "allreduce_across": terms["across"],
    }


def slowest_start(one: Interval, nodes: int) -> Interval:
    """The start-up of ``nodes`` machines: the slowest of ``nodes`` draws of ``one`` (a
    log-normal, median ``one.value``, 95th percentile ``one.high``)."""
    if nodes <= 1 or one.value <= 0 or one.high <= one.value:
        return one
    sigma = math.log(one.high / one.value) / P95
    median = one.value * math.exp(sigma * NormalDist().inv_cdf(0.5 ** (1 / nodes)))
    high = one.value * math.exp(sigma * NormalDist().inv_cdf(0.95 ** (1 / nodes)))
    return Interval(median, one.low, max(high, one.high))


def spot_overhead(one: float, nodes: int) -> float:
    """The expected restart overhead (a share of the run) of ``nodes`` spot machines, from one
    machine's ``one``: any one taken back stops every one, so N times the interruptions."""
    return one * max(nodes, 1)


def scaling(step_1: float, allreduce_1: float, allreduce_n: float, nodes: int) -> float:
    """Throughput on ``nodes`` machines over one machine's, at the same per-GPU batch (weak
    scaling): one machine's measured or predicted step ``step_1`` of which ``allreduce_1`` is
    its collective, replaced by ``allreduce_n`` on ``nodes``."""
    compute = max(step_1 - allreduce_1, 0.0)
    return nodes * step_1 / (compute + allreduce_n)


def cluster_overheads(one: Any, nodes: int) -> Any:
    """One machine's start-up terms (``providers.overheads.RunOverheads``) for ``nodes``
    machines: each term the slowest of N draws (``slowest_start``; the sum of each term's
    slowest is at least the slowest sum: an upper reading)."""
    if nodes <= 1 or one is None:
        return one
    terms = tuple(replace(t, seconds=slowest_start(t.seconds, nodes)) for t in one.terms)
    return replace(one, terms=terms)


def spot_training(runtime: Interval, nodes: int) -> Interval:
    """The training time to price on ``nodes`` spot machines, before ``price_run`` adds one
    machine's restart overhead: the extra interruptions of the other N - 1 machines
    (``spot_overhead``), on the expected value and the upper bound."""
    from advisor.providers.pricing import SPOT_RESTART_OVERHEAD, SPOT_RESTART_OVERHEAD_HIGH

    if nodes <= 1:
        return runtime
    value = (1 + spot_overhead(SPOT_RESTART_OVERHEAD, nodes)) / (1 + SPOT_RESTART_OVERHEAD)
    high = (1 + spot_overhead(SPOT_RESTART_OVERHEAD_HIGH, nodes)) / (1 + SPOT_RESTART_OVERHEAD_HIGH)
    return Interval(runtime.value * value, runtime.low, runtime.high * high)


def memory_view(
    machine: InstanceType, batch_size: int, nodes: int, replicate: bool
) -> tuple[InstanceType, int]:
    """The (machine, global batch) whose one-machine memory is one GPU's of ``nodes``
    machines: sharded over every GPU (one machine of N x g GPUs at the batch), or under HSDP
    over the machine's own g GPUs (one machine at the batch / N: the same per-GPU batch)."""
    if nodes <= 1:
        return machine, batch_size
    if replicate:
        return machine, max(1, -(-batch_size // nodes))
    return replace(machine, accelerator_count=machine.accelerator_count * nodes), batch_size


def networked(machines: Any, nodes: int) -> tuple[list[InstanceType], list[str]]:
    """The machines that can run on ``nodes`` machines (a GPU type with a cited network
    figure), and a line for each left out."""
    keep, out = [], []
    for m in machines:
        if m.accelerator and network_of(m.provider, m.instance_type) is not None:
            keep.append(m)
        else:
            out.append(f"{m.key}: left out on {nodes} machines (no cited network figure "
                       "between machines of this type: providers/catalog/data/network.csv)")  # fmt: skip
    return keep, out
