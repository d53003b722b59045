"""What ``advisor dashboard`` shows: the advisor's storage as optuna-dashboard should see it.

``DashboardView(storage)`` wraps the study storage (reads rewritten, writes passed through):

- each advisor trial's user attributes become short, sortable summary attributes (machine,
  GPUs, capacity, batch, run time and cost with their intervals, measured/modelled, price and
  its date); the full detail (estimate, phases, probe) becomes the trial's note, a Markdown
  table, instead of one-line JSON cut at 1,024 characters;
- the ``machine`` parameter's distribution is the trial's own machine, not the ~790-choice
  candidate list repeated in every trial (the study's API response stays small);
- the probe cache study (``advisor-probe-cache``) is not listed;
- a short accuracy run of ``suggest --tune`` (issue #29) shows its learning curve (the
  intermediate values: the validation error every check) and short attributes (role, metric,
  epochs, how it ended); its value is a validation error, not a run time or cost, so a
  finished one shows none (off the objective's plots) and none is ever the best trial; a
  pruned one keeps it, which optuna-dashboard needs to draw a pruned trial's curve.

``advisor.report.study_note`` writes the report as the study's note, which the dashboard shows.
"""

from __future__ import annotations

from typing import Any

from optuna.distributions import BaseDistribution, CategoricalDistribution
from optuna.storages import BaseStorage
from optuna.study import StudyDirection
from optuna.study._frozen import FrozenStudy
from optuna.trial import FrozenTrial, TrialState

from advisor.accuracy.trials import from_trial as accuracy_run
from advisor.durations import format_span
from advisor.records import TrialRecord, is_accuracy_trial

HIDDEN_STUDIES = ("advisor-probe-cache",)  # advisor.evaluation.local.PROBE_CACHE_STUDY
DETAIL_PATH = "/advisor/trials/{}"  # a trial's full detail page (by trial id)


def _how(rec: TrialRecord) -> str:
    """How the trial's figures were obtained, as the report labels them (issue #27)."""
    from advisor.report.rows import how_known, label

    if rec.source == "managed":
        return "managed"
    return label(how_known(rec.source, (rec.instance or {}).get("service")))


def summary(rec: TrialRecord) -> dict[str, Any]:
    """Short, sortable attributes of one trial (numbers stay numbers). The machine and batch
    size are the trial's parameters (their own columns in the dashboard)."""
    inst = rec.instance or {}
    gpus = inst.get("accelerator_count") or 0
    out: dict[str, Any] = {
        "gpus": f"{gpus}x {inst.get('accelerator')}" if gpus else "cpu",
        "capacity": "spot" if rec.spot else "on demand",
        "how": _how(rec),  # issue #27: "probed here, extrapolated", "modelled", ...
    }
    if rec.runtime is not None:
        out["runtime_s"] = round(rec.runtime.value, 1)
        out["runtime_interval"] = format_span(rec.runtime.low, rec.runtime.high)
        startup = (rec.estimate.get("overheads") or {}).get("startup_s")
        if startup:  # issue #14: runtime_s = startup_s + the training
            out["startup_s"] = round(float(startup["value"]), 1)
    if rec.cost is not None:
        out["cost_usd"] = round(rec.cost.value, 4)
        out["cost_interval"] = f"{rec.cost.low:.3g}-{rec.cost.high:.3g}"
    if rec.price_per_hour is not None:
        date = inst.get("price_date") or ("yours" if rec.price_per_hour == 0 else "?")
        out["price"] = f"{rec.price_per_hour:g}/h {date}"
    if rec.feasible is False:
        out["over_limit"] = True
    if rec.error:
        out["error"] = rec.error[:200]
    return out


def trial_note(rec: TrialRecord) -> str:
    """The trial's full detail as a short Markdown note (estimate, phases, probe)."""
    inst = rec.instance or {}
    lines = [
        f"**{rec.machine}** batch {rec.batch_size}: {_how(rec)}"
        + (f", region {inst['region']}" if inst.get("region") else "")
        + (
            f", USD {rec.price_per_hour:g}/h dated {inst.get('price_date', '?')}"
            if rec.price_per_hour
            else ""
        ),
        "",
        "| | value | low | high |",
        "|---|---|---|---|",
    ]
    for name, iv, unit in (("run time", rec.runtime, "s"), ("cost", rec.cost, "USD")):
        if iv is not None:
            lines.append(f"| {name} ({unit}) | {iv.value:.4g} | {iv.low:.4g} | {iv.high:.4g} |")
    over = rec.estimate.get("overheads") or {}
    for name, key in (("start-up", "startup_s"), ("training", "training_s")):  # issue #14
        if over.get(key):
            d = over[key]
            lines.append(f"| {name} (s) | {d['value']:.4g} | {d['low']:.4g} | {d['high']:.4g} |")
    if rec.phases is not None:
        for key in ("init", "t1", "t2", "v1", "v2"):
            iv = getattr(rec.phases, key)
            lines.append(f"| phase {key} (s) | {iv.value:.4g} | {iv.low:.4g} | {iv.high:.4g} |")
    est = rec.estimate
    if est.get("breakdown"):
        terms = ", ".join(f"{k} {float(v):.4g} s" for k, v in est["breakdown"].items())
        lines += ["", f"Run time = {terms} ({est.get('formula', '')}, "
                  f"{est.get('iterations_per_epoch', '?')} iterations/epoch x {rec.epochs} epochs)."]  # fmt: skip
    if rec.phases is not None and rec.phases.note:
        lines += ["", f"Model: {rec.phases.note}"]
    probe = rec.probe or {}
    if probe:
        its = probe.get("iteration_s") or []
        lines += [
            "",
            f"Probe: {probe.get('status', '?')} on {probe.get('device', '?')}, "
            f"{probe.get('threads', '?')} threads, {len(its)} iterations, "
            f"wall {float(probe.get('wall_s', 0.0)):.1f} s"
            + (f"; {'; '.join(probe.get('warnings') or [])}" if probe.get("warnings") else ""),
        ]
    if rec.error:
        lines += ["", f"Error: {rec.error}"]
    return "\n".join(lines)


def accuracy_summary(t: FrozenTrial) -> dict[str, Any]:
    """Short attributes of a short accuracy run (issue #29)."""
    a = accuracy_run(t)
    assert a is not None
    out: dict[str, Any] = {
        "kind": "short run (--tune)",
        "role": a.role,
        "seed": a.seed,
        "ended": a.ended,
        "metric": a.metric,
        "checks": a.checks,
        "epochs": a.epochs,
        "wall_s": round(a.wall_s, 1),
        "curve": "validation error (1 - val_accuracy)"
        if a.metric == "val_accuracy"
        else "validation loss",
    }
    if a.value is not None:
        out["last"] = round(a.value, 4)
    if a.of is not None:
        out["repeats_trial"] = a.of
    if a.error:
        out["error"] = a.error[:200]
    return out


def view_trial(t: FrozenTrial, detail_url: str = DETAIL_PATH) -> FrozenTrial:
    """The trial as the dashboard shows it (summary attributes, one-choice machine); the
    ``detail`` attribute is where its full detail is served."""
    if is_accuracy_trial(t):  # issue #29: a learning curve, no objective value
        # optuna-dashboard draws a pruned trial's curve only when it has a value: a pruned
        # short run keeps its last validation error (the history plot shows it with "Include
        # PRUNED trials"); a finished one has none, so no objective plot counts it
        pruned = t.state == TrialState.PRUNED
        return FrozenTrial(
            number=t.number, state=t.state, value=None, values=t.values if pruned else None,
            datetime_start=t.datetime_start, datetime_complete=t.datetime_complete,
            params=t.params, distributions=t.distributions, user_attrs=accuracy_summary(t),
            system_attrs=t.system_attrs, intermediate_values=t.intermediate_values,
            trial_id=t._trial_id,
        )  # fmt: skip
    dists: dict[str, BaseDistribution] = dict(t.distributions)
    machine = dists.get("machine")
    if isinstance(machine, CategoricalDistribution) and len(machine.choices) > 1:
        dists["machine"] = CategoricalDistribution((t.params["machine"],))
    rec = TrialRecord.from_trial(t)
    attrs = t.user_attrs
    if rec is not None and rec.source != "managed":
        attrs = summary(rec)
        attrs["detail"] = detail_url.format(t._trial_id)
        if "pruned_reason" in t.user_attrs:
            attrs["pruned_reason"] = str(t.user_attrs["pruned_reason"])[:200]
    return FrozenTrial(
        number=t.number,
        state=t.state,
        value=None,
        values=t.values,
        datetime_start=t.datetime_start,
        datetime_complete=t.datetime_complete,
        params=t.params,
        distributions=dists,
        user_attrs=attrs,
        system_attrs=t.system_attrs,
        intermediate_values=t.intermediate_values,
        trial_id=t._trial_id,
    )


def detail_page(t: FrozenTrial) -> str:
    """One trial's full detail as an HTML page: the summary, the estimate and phases as a
    table, the model note, and every stored attribute as indented JSON (nothing cut)."""
    import html
    import json

    rec = TrialRecord.from_trial(t)
    head = f"Trial {t.number}"
    parts = [f"<h2>{html.escape(head)}</h2>"]
    if rec is not None and rec.source != "managed":
        rows = "".join(
            f"<tr><th>{html.escape(k)}</th><td>{html.escape(str(v))}</td></tr>"
            for k, v in summary(rec).items()
        )
        parts.append(f"<table>{rows}</table>")
        parts.append(f"<pre class=note>{html.escape(trial_note(rec))}</pre>")
    parts.append("<h3>Parameters</h3>")
    parts.append(f"<pre>{html.escape(json.dumps(t.params, indent=2, default=str))}</pre>")
    for key, value in t.user_attrs.items():
        if key == "estimate" and isinstance(value, dict) and value.get("cost_usd") is None:
            # The estimate is made before pricing; the trial's cost is the priced one.
            value = dict(value, cost_usd=t.user_attrs.get("cost_usd"), priced_by="pricing")
        parts.append(f"<h3>{html.escape(key)}</h3>")
        parts.append(f"<pre>{html.escape(json.dumps(value, indent=2, default=str))}</pre>")
    style = (
        "body{font-family:sans-serif;max-width:70em;margin:1em auto}"
        "pre{white-space:pre-wrap;word-break:break-word;background:#f6f6f6;padding:.5em}"
        "th{text-align:left;padding-right:1em}"
    )
    return f"<!doctype html><meta charset=utf-8><title>{html.escape(head)}</title>" + (
        f"<style>{style}</style>" + "".join(parts)
    )


def _gzipped(app: Any, environ: dict[str, Any], start_response: Any) -> Any:
    """``app``'s answer compressed (the JSON API; browsers accept gzip)."""
    import gzip

    got: list[Any] = []

    def capture(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
        got[:] = [status, headers]
        return lambda data: None

    body = b"".join(app(environ, capture))
    status, headers = got
    packed = gzip.compress(body, compresslevel=6)
    headers = [
        (k, v) for k, v in headers if k.lower() not in ("content-length", "content-encoding")
    ]
    headers += [
        ("Content-Encoding", "gzip"),
        ("Content-Length", str(len(packed))),
        ("Vary", "Accept-Encoding"),
    ]
    start_response(status, headers)
    return [packed]


def with_detail_pages(app: Any, storage: BaseStorage) -> Any:
    """The dashboard's WSGI app plus ``/advisor/trials/<trial id>`` (``detail_page``), its
    JSON API gzipped for clients that accept it."""
    prefix = DETAIL_PATH.split("{")[0]

    def serve(environ: dict[str, Any], start_response: Any) -> Any:
        path = environ.get("PATH_INFO", "")
        if path.startswith("/api/") and "gzip" in environ.get("HTTP_ACCEPT_ENCODING", ""):
            return _gzipped(app, environ, start_response)
        if not path.startswith(prefix):
            return app(environ, start_response)
        try:
            body = detail_page(storage.get_trial(int(path[len(prefix) :]))).encode()
            status = "200 OK"
        except (ValueError, KeyError):
            body, status = b"no such trial", "404 Not Found"
        start_response(status, [("Content-Type", "text/html; charset=utf-8")])
        return [body]

    return serve


class DashboardView(BaseStorage):
    """The storage as ``advisor dashboard`` serves it (see the module docstring)."""

    def __init__(self, base: BaseStorage) -> None:
        self.base = base

    def __getattr__(self, name: str) -> Any:  # e.g. remove_session of an RDB storage
        return getattr(self.base, name)

    # -- rewritten reads ---------------------------------------------------------------

    def get_all_studies(self) -> list[FrozenStudy]:
        return [s for s in self.base.get_all_studies() if s.study_name not in HIDDEN_STUDIES]

    def get_all_trials(
        self, study_id: int, deepcopy: bool = True, states: Any = None
    ) -> list[FrozenTrial]:
        trials = self.base.get_all_trials(study_id, deepcopy=False, states=states)
        if states is not None and set(states) == {TrialState.COMPLETE}:
            # issue #29: who asks for completed trials reads their objective values (the
            # hyperparameter importance): short runs have none here
            trials = [t for t in trials if not is_accuracy_trial(t)]
        return [view_trial(t) for t in trials]

    def get_trial(self, trial_id: int) -> FrozenTrial:
        return view_trial(self.base.get_trial(trial_id))

    def get_study_system_attrs(self, study_id: int) -> dict[str, Any]:
        return self.base.get_study_system_attrs(study_id)

    def get_best_trial(self, study_id: int) -> FrozenTrial:
        """The best machine trial (short accuracy runs have no objective value here)."""
        done = self.base.get_all_trials(study_id, deepcopy=False, states=(TrialState.COMPLETE,))
        machine = [t for t in done if not is_accuracy_trial(t)]
        if not machine:
            raise ValueError("No trials are completed yet.")
        sign = -1.0 if self.get_study_directions(study_id)[0] == StudyDirection.MAXIMIZE else 1.0
        return view_trial(min(machine, key=lambda t: sign * float(t.values[0])))

    # -- passed through ----------------------------------------------------------------

    def create_new_study(self, directions: Any, study_name: str | None = None) -> int:
        return self.base.create_new_study(directions, study_name)

    def delete_study(self, study_id: int) -> None:
        self.base.delete_study(study_id)

    def set_study_user_attr(self, study_id: int, key: str, value: Any) -> None:
        self.base.set_study_user_attr(study_id, key, value)

    def set_study_system_attr(self, study_id: int, key: str, value: Any) -> None:
        self.base.set_study_system_attr(study_id, key, value)

    def get_study_id_from_name(self, study_name: str) -> int:
        if study_name in HIDDEN_STUDIES:
            raise KeyError(f"No such study {study_name}.")
        return self.base.get_study_id_from_name(study_name)

    def get_study_name_from_id(self, study_id: int) -> str:
        return self.base.get_study_name_from_id(study_id)

    def get_study_directions(self, study_id: int) -> list[StudyDirection]:
        return self.base.get_study_directions(study_id)

    def get_study_user_attrs(self, study_id: int) -> dict[str, Any]:
        return self.base.get_study_user_attrs(study_id)

    def create_new_trial(self, study_id: int, template_trial: FrozenTrial | None = None) -> int:
        return self.base.create_new_trial(study_id, template_trial)

    def set_trial_param(
        self, trial_id: int, param_name: str, param_value_internal: float, distribution: Any
    ) -> None:
        self.base.set_trial_param(trial_id, param_name, param_value_internal, distribution)

    def set_trial_state_values(self, trial_id: int, state: TrialState, values: Any = None) -> bool:
        return self.base.set_trial_state_values(trial_id, state, values)

    def set_trial_intermediate_value(
        self, trial_id: int, step: int, intermediate_value: float
    ) -> None:
        self.base.set_trial_intermediate_value(trial_id, step, intermediate_value)

    def set_trial_user_attr(self, trial_id: int, key: str, value: Any) -> None:
        self.base.set_trial_user_attr(trial_id, key, value)

    def set_trial_system_attr(self, trial_id: int, key: str, value: Any) -> None:
        self.base.set_trial_system_attr(trial_id, key, value)
