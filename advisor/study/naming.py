"""The study's name: the same question gives the same name, so a re-run resumes the study."""

from __future__ import annotations

import hashlib
import json

from advisor.evaluation.workload import WorkloadInfo
from advisor.options import SuggestOptions
from advisor.prediction.step.plan import plan_fields
from advisor.search_spaces.space import JointSpace, space_to_dict


def study_name_for(
    options: SuggestOptions, workload: WorkloadInfo, space: JointSpace, snapshot: str
) -> str:
    """A stable name: the same inputs give the same study, so a re-run resumes it."""
    if options.study_name:
        return options.study_name
    objective = options.resolved_objective
    ident = {
        "space": space_to_dict(space),
        "budget": options.budget_usd,
        "deadline": options.deadline_s,
        "epochs": options.epochs,
        "at_batch": options.at_batch,  # issue #19
        "epochs_at": sorted(options.epochs_at),  # issue #19
        # issue #19: epochs per batch size changed (fitted to known points since "-fit")
        "epochs_model": "gradient-noise-scale-fit",
        "snapshot": snapshot,
        "iterations": options.probe_iterations,
        "n_train": workload.n_train,
        "n_val": workload.n_val,
        # issue #14: runtime and cost are the whole job's (start-up + training) since this
        # key: an older study (training alone) is not resumed with the new meaning
        "job_overheads": 1,
        # issue #27: only probes that ran are charged, VMs pay the image pull, previous-
        # generation and TPU machines are left out: an older study is not resumed
        "charges": "probes-run",
        "data_bytes": workload.data_bytes,
    }
    if options.include_previous_generation:  # issue #27: more candidates, another answer
        ident["previous_generation"] = True
    if options.precision != "fp32":  # issue #35: another plan, another answer
        ident["precision"] = options.precision
    if options.plan:  # issue #35: parts of the plan fixed
        ident["plan"] = plan_fields(options.plan)
    if options.cloud_probes:  # issue #14: measured machines change the answer (and emulated)
        ident["cloud_probes"] = [options.cloud_probes, options.emulate_cloud]
    from advisor.providers.owned import load_owned  # issue #37: machines you own

    owned = [m.to_dict() for m in load_owned()]
    if owned:  # more candidates, another answer
        ident["owned"] = owned
    if options.value_of_time is not None:  # issue #37: another ranking, another answer
        ident["value_of_time"] = options.value_of_time
    if options.max_nodes > 1:  # issue #49: more candidates, another answer
        ident["max_nodes"] = options.max_nodes
    digest = hashlib.sha1(json.dumps(ident, sort_keys=True, default=str).encode()).hexdigest()
    name = workload.name.replace(":", ".")
    return f"advisor-{name}-{workload.framework}-{objective}-{digest[:8]}"
