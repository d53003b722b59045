"""Issue #34: the memory the report shows -- each row's step memory per GPU against the GPU's,
and the machine x batch pairs left out because their step does not fit there."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from advisor.evaluation.memory_checks import DOES_NOT_FIT

if TYPE_CHECKING:
    from advisor.outcome import SuggestOutcome


EXAMPLES = 4  # machine types named in the note


def _have(ev: Any) -> float:
    memory = ev.estimate.get("memory") or {}
    return float(memory.get("have_gib") or 0.0)


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
    when the model is too big to probe here): how many, which, and one line."""
    out = not_fitting(outcome)
    if not out:
        return None
    pairs = [f"{ev.machine} b{ev.batch_size}" for ev in out]
    first: dict[str, Any] = {}  # one example per machine type: its smallest batch
    for ev in sorted(out, key=lambda e: (e.batch_size, e.machine)):
        first.setdefault(ev.machine.removesuffix(":spot"), ev)
    machines = sorted(first)
    # this machine first, then the machine types with the most memory per device (the nearest)
    nearest = sorted(first.items(), key=lambda kv: (not kv[0].startswith("local"), -_have(kv[1])))
    shown = "; ".join(
        f"{m} at batch {ev.batch_size}: {str(ev.error).removeprefix(DOES_NOT_FIT + ': ')}"
        for m, ev in nearest[:EXAMPLES]
    )
    total = max(len(outcome.screen), len(outcome.candidates) * len(outcome.space.batch_sizes))
    text = (
        f"Does not fit: {len(out)} of {total} machine x batch pairs ({_types(machines)} machine "
        f"type(s)) cannot hold a step in their memory, so they were not ranked or recommended, "
        f"no probe ran for them and they charged nothing (e.g. {shown})"
    )
    return {"count": len(out), "of": total, "pairs": pairs, "text": text}


def _types(keys: list[str]) -> int:
    """Machine types among ``keys`` (a type on 1 and on 4 machines counts once, issue #49)."""
    from advisor.providers.catalog import MachineKey

    return len({MachineKey(k).base for k in keys})
