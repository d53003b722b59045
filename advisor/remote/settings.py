"""Where remote probes run: the advisor's image and each cloud's settings (issue #14).

Read from ``$ADVISOR_HOME/cloud.yaml`` (bounded, safe YAML) and overridden by command-line
options; the keys are ``advisor submit``'s options::

    image: 123456789012.dkr.ecr.us-east-1.amazonaws.com/advisor:latest   # default image
    sagemaker: {role: arn:aws:iam::123456789012:role/SageMakerRole, region: us-east-1,
                output: s3://my-bucket/advisor}
    vertex: {project: my-project, location: us-central1, output: gs://my-bucket/advisor,
             image: us-docker.pkg.dev/my-project/advisor/advisor:latest}
    azureml: {subscription: 0000-..., resource_group: rg, workspace: ws,
              image: myregistry.azurecr.io/advisor:latest}   # compute: a cluster (optional)

A provider section may name its own ``image`` (each cloud pulls from its own registry). A
provider without a section is "not configured": asking for it is a one-line error naming the
file and the options, never a crash. Credentials are never kept here: they come from each
cloud's environment (``aws configure``, ``gcloud auth``, ``az login``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from advisor.config import home
from advisor.errors import AdvisorError
from advisor.providers import registry

SETTINGS_FILE = "cloud.yaml"
# Each provider's keys (``advisor submit``'s options, plus its output location and image),
# by its back end's name: ``advisor.providers.registry``.
PROVIDER_KEYS: dict[str, tuple[str, ...]] = {p.backend: p.settings for p in registry.PROVIDERS}


def settings_path() -> Path:
    """``$ADVISOR_HOME/cloud.yaml``."""
    return home() / SETTINGS_FILE


@dataclass(frozen=True)
class CloudSettings:
    """The default ``image`` and, per provider, its settings (only the keys set)."""

    image: str | None = None
    providers: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    source: str = "defaults"  # where they were read ("~/.advisor/cloud.yaml", "defaults")

    @classmethod
    def load(cls, path: Path | None = None) -> CloudSettings:
        """The settings in ``path`` (default ``settings_path()``); none when it is absent."""
        path = path or settings_path()
        if not path.exists():
            return cls()
        data = _read_yaml(path)
        if data is None:
            return cls(source=str(path))
        if not isinstance(data, dict):
            raise AdvisorError(f"{path}: expected a mapping of settings.", _fix(path))
        unknown = sorted(set(data) - {"image", *PROVIDER_KEYS})
        if unknown:
            raise AdvisorError(
                f"{path}: unknown key(s) {', '.join(map(str, unknown))}.",
                f"use image, {', '.join(PROVIDER_KEYS)}.",
            )
        providers: dict[str, dict[str, Any]] = {}
        for name, keys in PROVIDER_KEYS.items():
            section = data.get(name)
            if section is None:
                continue
            if not isinstance(section, dict):
                raise AdvisorError(f"{path}: {name} must be a mapping.", f"use {name}: {{...}}.")
            bad = sorted(set(section) - set(keys))
            if bad:
                raise AdvisorError(
                    f"{path}: unknown {name} key(s) {', '.join(map(str, bad))}.",
                    f"use {', '.join(keys)}.",
                )
            providers[name] = {k: str(v) for k, v in section.items() if v is not None}
        image = data.get("image")
        return cls(None if image is None else str(image), providers, str(path))

    def with_options(self, provider: str, **options: Any) -> CloudSettings:
        """These settings with ``provider``'s keys (and ``image``) overridden by the options
        given (None: not given). Unknown option names are ignored (other providers')."""
        image = options.get("image") or self.image
        given = {
            k: str(v)
            for k, v in options.items()
            if v is not None and k in PROVIDER_KEYS.get(provider, ()) and k != "image"
        }
        if not given:
            return replace(self, image=image)
        merged = {**self.providers.get(provider, {}), **given}
        return replace(self, image=image, providers={**self.providers, provider: merged})

    def provider(self, name: str) -> dict[str, Any]:
        """``name``'s settings; raises one line when a required one is missing."""
        section = dict(self.providers.get(name, {}))
        missing = [k for k in registry.get(name).required if not section.get(k)]
        if missing or name not in self.providers:
            need = missing or [k for k in PROVIDER_KEYS[name] if k != "image"][:3]
            options = " ".join(f"--{k.replace('_', '-')} ..." for k in need)
            where = "no section" if name not in self.providers else f"no {', '.join(missing)}"
            raise AdvisorError(
                f"{registry.get(name).backend_label} probe jobs are not configured ({where} in {settings_path()}).",
                f"add them under '{name}:' in {settings_path()} (`advisor probe --on` also "
                f"takes {options}).",
            )
        return section

    def image_for(self, name: str) -> str:
        """The container image for ``name``'s jobs: its own, else the default."""
        image = self.providers.get(name, {}).get("image") or self.image
        if not image:
            raise AdvisorError(
                f"No container image for {registry.get(name).backend_label} probe jobs.",
                f"pass --image URI (docker/Dockerfile, pushed), or set image: in {settings_path()}.",
            )
        return str(image)


def provider_of(service: str) -> str | None:
    """The back end whose managed service runs probe jobs for a catalog ``service``."""
    provider = registry.for_service(service)
    return None if provider is None else provider.backend


def _read_yaml(path: Path) -> Any:
    import yaml

    from advisor.search_spaces.safe_yaml import MAX_BYTES, BoundedLoader

    try:
        raw = path.read_bytes()[: MAX_BYTES + 1]
    except OSError as exc:
        raise AdvisorError(f"Cannot read {path}: {exc.strerror}.", "check the file.") from exc
    if len(raw) > MAX_BYTES:
        raise AdvisorError(f"{path} is larger than {MAX_BYTES // 1024} KiB.", _fix(path))
    try:
        loader = BoundedLoader(raw.decode("utf-8"), str(path))
        try:
            return loader.get_single_data()
        finally:
            loader.dispose()
    except UnicodeDecodeError as exc:
        raise AdvisorError(f"{path} is not UTF-8 text.", _fix(path)) from exc
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f" line {mark.line + 1}" if mark is not None else ""
        raise AdvisorError(f"{path}{line}: not valid YAML.", _fix(path)) from exc


def _fix(path: Path) -> str:
    return f"write {path} as in docs/tuning.md (image:, sagemaker:, vertex:, azureml:)."
