"""Issue #49: what several machines would have given when the study tried one (``--max-nodes
1``, the default): the GPU types with a cited network figure among the best screened rows,
scored on 2, 4 and 8 machines at every batch size of the space. These are no candidates (the
study's answer does not change); the report compares them with its recommendation
(``advisor.report.nodes``).

They are scored with the state replicated across machines (``replicate=nodes``: DDP, or HSDP
where the plan shards, within each machine), whose memory per GPU is one machine's at the
per-GPU batch (``timing.nodes.memory_view``): the memory traced for the one-machine rows
serves them (issue #46: sharding over every GPU of 2-8 machines asked for a memory trace per
GPU count, tens of minutes for an 8B model), and only the plans whose memory the one-machine
search traced are looked at (``best_forecast(mode="traced")``: the hint traces nothing; for
Llama 3.1 8B under LoRA it traced 11 layouts of its own, 44 s of a 162 s command).
``--max-nodes`` searches every plan."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from advisor.evaluation.candidates import Candidate, node_counts
from advisor.evaluation.contract import Backend, Evaluation, Scored
from advisor.options import is_feasible, objective_values

if TYPE_CHECKING:
    from advisor.outcome import SuggestOutcome

HINT_NODES = 8  # most machines the report looks at when the study tried one
HINT_TYPES = 2  # networked types (best screened first) scored on several machines


def more_nodes(outcome: SuggestOutcome, backend: Backend) -> list[Scored]:
    """The best ``HINT_TYPES`` networked one-machine candidates of the screen (feasible
    first, by the objective) scored on 2..``HINT_NODES`` machines at each batch size; none
    when the study tried several machines, the back end does not model them, or the search
    was not screened."""
    from advisor.prediction.timing.nodes import networked

    if outcome.options.max_nodes > 1 or not backend.models_nodes or not outcome.screen:
        return []
    by_key = {c.key: c for c in outcome.candidates}
    scored = [ev for ev in outcome.screen.values() if isinstance(ev, Evaluation)]
    scored.sort(key=lambda ev: (not is_feasible(outcome.options, ev),
                                objective_values(outcome.objective, ev)))  # fmt: skip
    picked: list[Candidate] = []
    for ev in scored:
        cand = by_key.get(ev.machine)
        if cand is None or cand.local or any(p.instance.key == cand.instance.key for p in picked):
            continue
        if networked([cand.instance], 2)[0]:
            picked.append(cand)
        if len(picked) == HINT_TYPES:
            break
    out: list[Scored] = []
    settings = backend.settings
    fields = dict(settings.plan_fields)
    backend.configure(replace(settings, plan_fields={"replicate": "nodes", **fields}))
    try:
        for cand in picked:
            for n in node_counts(HINT_NODES)[1:]:
                many = Candidate(cand.instance, cand.spot, n)
                for batch in outcome.space.batch_sizes:
                    found = backend.screen(outcome.workload, many, batch, {}, "traced")
                    if found is not None:
                        out.append(found)
    finally:
        backend.configure(settings)
    return out
