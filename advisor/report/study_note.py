"""The report as the study's note, which optuna-dashboard shows on the study's page.

``study_note(report)`` is the report as Markdown; ``save_study_note(study, report)`` writes it
in optuna-dashboard's note format without importing optuna-dashboard (about 3 s: it loads
scikit-learn), and writes nothing when the note already says the same (a resumed study).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from advisor.durations import format_duration
from advisor.report.hyperparameters import note_lines  # issue #29

if TYPE_CHECKING:
    import optuna


def study_note(report: dict[str, Any]) -> str:
    """The report as the study's Markdown note."""
    lines = [f"## {report['workload']} ({report['framework']}): objective {report['objective']}"]
    if report.get("stale_warning"):
        lines += ["", f"**Prices:** {report['stale_warning']}"]
    rec = report.get("recommended")
    if rec:
        lines += [
            "",
            f"**Recommended:** {rec['machine']} batch {rec['batch_size']}: "
            f"{format_duration(rec['runtime_s']['value'])}, USD {rec['cost_usd']['value']:.3g} "
            f"({rec['source']}). Why: {rec['reason']}.",
        ]
        if rec.get("region_note"):
            lines.append(f"Priced in {rec['region_note']}.")
    ranges = report.get("tuned_ranges") or {}
    if ranges:
        lines += ["", "**Tuning ranges** (handed to the managed tuning job): "
                  + ", ".join(f"{k} {v}" for k, v in ranges.items())]  # fmt: skip
    lines += note_lines(report)  # issue #29: what the short runs of --tune found
    lines += [
        "",
        "| # | machine | batch | run time | cost USD | source |",
        "|---|---|---|---|---|---|",
    ]
    for i, r in enumerate(report["ranking"][:15], 1):
        lines.append(
            f"| {i} | {r['machine']} | {r['batch_size']} | {format_duration(r['runtime_s']['value'])} "
            f"| {r['cost_usd']['value']:.3g} | {r['source']}{'' if r['feasible'] else ', over limit'} |"
        )
    lines += ["", *(f"- {n}" for n in report.get("notes", []))]
    return "\n".join(lines)


# optuna-dashboard's note format (optuna_dashboard/_note.py, 0.15-0.21): a version number and
# the Markdown body cut into study system attributes of at most 2045 characters. Written here
# so that saving a note does not import optuna-dashboard (about 3 s: it loads scikit-learn);
# tests/advisor/report/test_one_screen.py reads it back with optuna-dashboard's get_note.
NOTE_VERSION_KEY = "dashboard:note_ver"
NOTE_PREFIX = "dashboard:note_str:"
NOTE_CHUNK = 2045


def save_study_note(study: optuna.Study, report: dict[str, Any]) -> bool:
    """Write the report into the study's note (optuna-dashboard shows it); nothing is
    written when the note already says the same. Returns whether it was written."""
    body = study_note(report)
    storage, study_id = study._storage, study._study_id
    attrs = storage.get_study_system_attrs(study_id)
    old = [k for k in attrs if k.startswith(NOTE_PREFIX)]
    current = "".join(
        attrs[f"{NOTE_PREFIX}{i}"] for i in range(len(old)) if f"{NOTE_PREFIX}{i}" in attrs
    )
    if NOTE_VERSION_KEY in attrs and current == body:
        return False
    chunks = [body[i : i + NOTE_CHUNK] for i in range(0, len(body), NOTE_CHUNK)] or [""]
    storage.set_study_system_attr(
        study_id, NOTE_VERSION_KEY, int(attrs.get(NOTE_VERSION_KEY, 0)) + 1
    )
    for i, chunk in enumerate(chunks):
        storage.set_study_system_attr(study_id, f"{NOTE_PREFIX}{i}", chunk)
    for i in range(len(chunks), len(old)):  # a shorter note: clear the old tail
        storage.set_study_system_attr(study_id, f"{NOTE_PREFIX}{i}", "")
    return True
