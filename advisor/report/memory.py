"""Issue #34: the memory the report shows -- each row's step memory per GPU against the GPU's,
and the machine x batch pairs left out because their step does not fit there."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from advisor.evaluation.memory_checks import DOES_NOT_FIT

if TYPE_CHECKING:
    from advisor.outcome import SuggestOutcome


EXAMPLES = 4  # machine types named in the note


def _short(ev: Any) -> float:
    """How many times its memory the pair needs at the least (any plan's floor where none
    was traced; an unknown need: last)."""
    memory = ev.estimate.get("memory") or {}
    need = memory.get("least_need_gib") or memory.get("need_gib")
    have = float(memory.get("have_gib") or 0.0)
    return float(need) / have if need and have else float("inf")


def memory_text(estimate: dict[str, Any]) -> str | None:
    """A row's ``21.3 of 22.0 GiB`` (or ``memory unknown``); None for a row without GPUs."""
    memory = estimate.get("memory")
    return str(memory["text"]) if isinstance(memory, dict) and memory.get("text") else None


def _does_not_fit(ev: Any) -> bool:
    return ev is not None and not ev.ok and str(ev.error or "").startswith(DOES_NOT_FIT)


def not_fitting(outcome: SuggestOutcome) -> list[Any]:
    """The scored pairs (screened, or trials: the search without a screen) whose step does
    not fit, once each."""
    import optuna

    from advisor.records import TrialRecord

    found = {(ev.machine, ev.batch_size): ev for ev in outcome.screen.values() if _does_not_fit(ev)}
    fail = (optuna.trial.TrialState.FAIL,)
    for t in outcome.study.get_trials(deepcopy=False, states=fail):
        rec = TrialRecord.from_trial(t)
        ev = None if rec is None else rec.to_evaluation()
        if ev is not None and _does_not_fit(ev):
            found.setdefault((ev.machine, ev.batch_size), ev)
    return list(found.values())


def left_out(outcome: SuggestOutcome) -> dict[str, Any] | None:
    """The pairs whose step does not fit their devices' memory (this machine's included,
    when the model is too big to probe here): how many, which, and one line. Issue #46: the
    pairs whose plain plans do not fit and whose other plans were not searched, as even their
    fastest is slower and dearer than a row that fits (``advisor.study.screen``), are counted
    apart (``beaten``), with those whose search stopped before any plan fitted (issue #48):
    some plan might fit them, but none could be the answer."""
    found = not_fitting(outcome)
    if not found:
        return None
    out = [ev for ev in found if not ev.estimate.get("beaten_by")]
    beaten = [ev for ev in found if ev.estimate.get("beaten_by")]
    total = max(len(outcome.screen), len(outcome.candidates) * len(outcome.space.batch_sizes))
    parts = []
    if out:
        parts.append(
            f"Does not fit: {len(out)} of {total} machine x batch pairs ({_types(_machines(out))} "
            f"machine type(s)) cannot hold a step in their memory, so they were not ranked or "
            f"recommended, no probe ran for them and they charged nothing (e.g. {_shown(out)})"
        )
    if beaten:
        by = beaten[0].estimate["beaten_by"]
        during = sum(bool(ev.estimate["beaten_by"].get("during_search")) for ev in beaten)
        stopped = f" ({during} of them: not all, their search stopped first)" if during else ""
        parts.append(
            f"{'Not searched' if not out else 'not searched'}: {len(beaten)} of {total} pairs "
            f"({_types(_machines(beaten))} machine type(s)) do not fit under their plain plans "
            f"and their other plans were not traced{stopped}: even the fastest plan left is "
            f"slower and dearer than a row that fits (e.g. {beaten[0].machine} at batch "
            f"{beaten[0].batch_size}: slower and dearer than {by['machine']} at batch "
            f"{by['batch_size']}), so none could be the answer"
        )
    return {"count": len(out), "beaten": len(beaten), "of": total,
            "pairs": [f"{ev.machine} b{ev.batch_size}" for ev in out],
            "beaten_pairs": [f"{ev.machine} b{ev.batch_size}" for ev in beaten],
            "text": "; ".join(parts)}  # fmt: skip


def _machines(evs: list[Any]) -> list[str]:
    return sorted({ev.machine.removesuffix(":spot") for ev in evs})


def _shown(out: list[Any]) -> str:
    """One example per machine type (its smallest batch): this machine first, then the types
    nearest to fitting (the least need over the memory they have: a GPU short of 1.4x before a
    CPU machine whose RAM is larger but short of 14x)."""
    first: dict[tuple[str, int], Any] = {}
    for ev in sorted(out, key=lambda e: (e.batch_size, e.machine)):
        first.setdefault(_hardware(ev.machine), ev)
    nearest = sorted(
        first.values(), key=lambda ev: (not ev.machine.startswith("local"), _short(ev))
    )
    return "; ".join(
        f"{ev.machine.removesuffix(':spot')} at batch {ev.batch_size}: "
        f"{str(ev.error).removeprefix(DOES_NOT_FIT + ': ')}"
        for ev in nearest[:EXAMPLES]
    )


def _hardware(key: str) -> tuple[str, int]:
    """A machine as hardware: its instance type on its machine count, one for a cloud's VM and
    its managed service (``azure-vm:`` and ``azure-ml:NC24ads_A100_v4``, ``ec2:`` and
    ``sagemaker:ml.p3.2xlarge``), which hold a step alike."""
    from advisor.providers.catalog import MachineKey

    machine = MachineKey(key)
    return machine.instance_type.removeprefix("ml."), machine.nodes


def _types(keys: list[str]) -> int:
    """Machine types among ``keys`` (a type on 1 and on 4 machines counts once, issue #49)."""
    from advisor.providers.catalog import MachineKey

    return len({MachineKey(k).base for k in keys})
