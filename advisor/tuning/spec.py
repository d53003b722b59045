"""Building the provider-neutral ``TuningSpec``: from a study's recommended trial, or on one
machine (a catalog key or the service's own type name)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from advisor.errors import AdvisorError
from advisor.providers.catalog import MachineKey
from advisor.providers.tuning import TuningSpec, job_name
from advisor.search_spaces.space import Param, space_from_dict
from advisor.tuning.pick import study_pick
from advisor.tuning.warm_start import apply, warm_start

if TYPE_CHECKING:
    import optuna

    from advisor.providers.catalog import InstanceType


def spec_from_study(
    study: optuna.Study,
    provider: str,
    *,
    image: str,
    catalog: Any = None,
    tune: Iterable[str] | None = None,
    instance: str | None = None,
    **options: Any,
) -> TuningSpec:
    """A spec that tunes the study's hyperparameters on its recommended machine and batch size.

    The machine and batch size are fixed to the recommended trial's; so are hyperparameters
    marked ``affects_runtime`` (the time and cost estimate holds only for them), unless named
    in ``tune``. ``instance`` overrides the machine. ``options`` go to ``TuningSpec``.
    """
    from advisor.providers.backends import backend_class

    attrs = study.user_attrs
    missing = [k for k in ("workload", "space") if k not in attrs]
    if missing:
        raise AdvisorError(
            f"Study '{study.study_name}' is not an advisor study (no {', '.join(missing)}).",
            "pass a study made by `advisor suggest`, or use --instance with --model.",
        )
    space = space_from_dict(attrs["space"])
    cls = backend_class(provider)
    # issue #28: what the report recommended (a trial or a screened pair), else the best trial
    pick = study_pick(study, tuple(cls.services), cls.name)
    notes: list[str] = [] if instance else list(pick.notes)
    key = instance or pick.machine
    fixed: dict[str, Any] = {"model": attrs["workload"]}
    if pick.batch_size is not None:
        fixed["batch_size"] = int(pick.batch_size)
    epochs = pick.epochs or attrs.get("epochs")
    if epochs:
        fixed["epochs"] = int(epochs)
    if pick.plan and not instance:  # issue #35: the plan the estimate holds for, on its machine
        fixed["plan"] = pick.plan
    elif pick.plan:
        notes.append(f"the study's plan ({pick.plan}) is for {pick.machine}: not carried over")
    if not instance:  # issue #45: what the report predicted, printed beside what the run measures
        from advisor.report.expected import expect_options

        fixed.update(expect_options(pick.expected))
    wanted = set(tune) if tune is not None else None
    tuned: list[Param] = []
    for p in space.hyperparameters:
        free = p.name in wanted if wanted is not None else not p.affects_runtime
        if free:
            if p.condition is not None:
                notes.append(f"{p.name} is tuned unconditionally (the services have no conditions)")
            tuned.append(p)
        elif p.name in pick.params:
            fixed[p.name] = pick.params[p.name]
    if wanted is not None:
        unknown = wanted - {p.name for p in space.hyperparameters}
        if unknown:
            raise AdvisorError(
                f"--tune names {sorted(unknown)}, which the study's space does not have.",
                f"use some of: {', '.join(p.name for p in space.hyperparameters)}.",
            )
    if not instance:
        options.setdefault("price_per_hour", pick.price_per_hour)
    # issue #29: start from what the study learnt (short runs of --tune, imported jobs)
    start = warm_start(study, tuned, provider, fixed.get("batch_size"))
    notes += start.notes
    if start.parents:
        options.setdefault("warm_start_parents", start.parents)
    return spec_for_machine(
        provider,
        key,
        workload=attrs["workload"],
        hyperparameters=apply(tuned, start),
        fixed=fixed,
        image=image,
        catalog=catalog,
        notes=tuple(notes),
        **options,
    )


def spec_for_machine(
    provider: str,
    machine: str,
    *,
    workload: str,
    hyperparameters: tuple[Param, ...],
    fixed: Mapping[str, Any],
    image: str,
    catalog: Any = None,
    **options: Any,
) -> TuningSpec:
    """A spec on one machine, given as a catalog key or as the service's own type name."""
    from advisor.providers.backends import backend_class

    cls = backend_class(provider)
    key = MachineKey.named(machine, cls.services[0])
    parsed = MachineKey(key)
    service, itype, spot = parsed.service, parsed.instance_type, parsed.spot
    if parsed.nodes > 1:  # issue #49: the row's machines, joined by advisor.train's torchrun
        options.setdefault("instance_count", parsed.nodes)
    if service == "local":
        raise AdvisorError(
            "The recommended machine is this local machine, which no managed service runs.",
            "pass --instance with a cloud machine type (see `advisor catalog`).",
        )
    row = catalog_row(key, catalog)
    accelerator = row.accelerator if row is not None else None
    count = row.accelerator_count if row is not None else 0
    stamp = options.pop("stamp", None) or _stamp()
    options.setdefault("spot", spot)
    if options.get("price_per_hour") is None and row is not None:
        options["price_per_hour"] = row.price(spot=spot and row.spot_usd_per_h is not None)
    return TuningSpec(
        job_name=options.pop("job_name", None) or job_name(workload, stamp),
        workload=workload,
        image=image,
        instance_type=cls.machine_type(key, row),
        hyperparameters=hyperparameters,
        fixed=dict(fixed),
        accelerator=accelerator,
        accelerator_count=count,
        machine_key=MachineKey.of(f"{service}:{itype}", spot, parsed.nodes),
        **options,
    )


def catalog_row(key: str, catalog: Any = None) -> InstanceType | None:
    """The catalog row of ``key`` (without ``:spot``), or None when no catalog is available."""
    parsed = MachineKey(key)
    service, itype = parsed.service, parsed.instance_type
    if catalog is None:
        from advisor.providers.catalog import load

        catalog = load()
    try:
        row: InstanceType = catalog.get(f"{service}:{itype}")
        return row
    except AdvisorError:
        if service == "sagemaker" and itype.startswith("ml."):
            # SageMaker rows may be missing; the EC2 row has the same hardware.
            try:
                row = catalog.get(f"ec2:{itype[3:]}")
                return row
            except AdvisorError:
                return None
        raise


def _stamp() -> str:
    import time

    return time.strftime("%m%d-%H%M%S")
