"""A user model's dataset sizes, as its builder gives them (issue #36).

A user builder (``module:function``) returns its data: PyTorch datasets (or DataLoaders)
whose ``len`` is the number of samples, or a ``KerasSetup`` that declares ``n_train``/``n_val``
(the sizes to extrapolate to) or holds arrays whose first axis says them. ``builder_sizes``
builds it once per process and reads them, so ``advisor suggest`` and ``advisor predict``
need ``--n-train``/``--n-val`` only where the builder cannot say (a dataset without a length);
the flags stay overrides. A PyTorch model is built on the meta device (no weights allocated,
as ``advisor.prediction.step.loader`` does), so a model too big for this machine is measured
the same way.

Building it starts the isolated worker and imports the framework (3-5 s here, most of a
resumed ``advisor suggest``'s time, issue #46), so the sizes are kept in the advisor's folder
(``user-sizes.json``) beside the module file's path, size and modification time, and read
back while that file is unchanged; the module is looked up as the worker finds it, without
importing it (no user code runs in this process, issue #50).
"""

from __future__ import annotations

import functools
import json
import os
import sys
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path

from advisor.errors import AdvisorError


@dataclass(frozen=True)
class BuilderSizes:
    """The training and validation samples the builder's data holds (None: it cannot say),
    and where they were read (one line, for notes)."""

    n_train: int | None
    n_val: int | None
    basis: str


def user_sizes(
    model: str, framework: str, n_train: int | None, n_val: int | None
) -> tuple[int, int]:
    """The (training, validation) sizes of the user model ``model``: ``n_train``/``n_val``
    when given (``--n-train``/``--n-val``), else what its builder's data says; a one-line
    ``AdvisorError`` when neither can say the training size."""
    if not n_train:
        sizes = builder_sizes(model, framework)
        if not sizes.n_train:
            raise AdvisorError(
                f"--model {model} is a user model whose training data has no length, so its "
                "dataset size is unknown.",
                "pass --n-train N (and --n-val N) with it.",
            )
        n_train = sizes.n_train
        n_val = sizes.n_val if n_val is None else n_val
    return n_train, n_val or 0


def builder_sizes(model: str, framework: str = "torch", batch_size: int = 32) -> BuilderSizes:
    """The dataset sizes ``model``'s builder gives, built with its own sizes and defaults
    (see the module docstring); a builder that fails is a one-line ``AdvisorError``."""
    return _cached(model, framework, batch_size)


@functools.lru_cache(maxsize=16)
def _cached(model: str, framework: str, batch_size: int) -> BuilderSizes:
    key = f"{model}|{framework}|{batch_size}"
    stamp = _module_stamp(model)
    kept = _kept().get(key) if stamp else None
    if isinstance(kept, dict) and kept.get("stamp") == stamp:
        try:
            return BuilderSizes(**kept["sizes"])
        except TypeError:  # an entry of another shape: built again
            pass
    sizes = _built(model, framework, batch_size)
    if stamp:
        _keep(key, {"stamp": stamp, "sizes": asdict(sizes)})
    return sizes


def _kept_path() -> Path:
    from advisor.config import home

    return home() / "user-sizes.json"


def _kept() -> dict[str, object]:
    try:
        data = json.loads(_kept_path().read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _keep(key: str, entry: dict[str, object]) -> None:
    """Add ``entry`` to the kept sizes (written whole, then renamed into place); a folder that
    cannot be written keeps nothing."""
    path = _kept_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps({**_kept(), key: entry}, indent=1))
        tmp.replace(path)
    except OSError:
        pass


def _module_stamp(model: str) -> str | None:
    """``path|size|mtime_ns`` of the file of ``model``'s module, looked up in the working
    directory and on ``sys.path`` as the worker finds it, without importing it; None when it
    is not a plain file found there (an ``hf:`` model, a built-in, a zip)."""
    module, sep, _ = model.partition(":")
    if not sep or model.startswith("hf:"):
        return None
    rel = Path(*module.split("."))
    for root in (os.getcwd(), *sys.path):
        for path in (Path(root or ".") / f"{rel}.py", Path(root or ".") / rel / "__init__.py"):
            if path.is_file():
                st = path.stat()
                return f"{path.resolve()}|{st.st_size}|{st.st_mtime_ns}"
    return None


def _built(model: str, framework: str, batch_size: int) -> BuilderSizes:
    from advisor.evaluation.user_code import run_model_code
    from advisor.prediction.step.traces import user_modules_importable

    try:
        with user_modules_importable(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            read = _keras if framework == "keras" else _torch
            doing = "built to read its dataset sizes"
            return run_model_code(model, doing, read, model, batch_size)  # issue #50
    except AdvisorError:
        raise
    except Exception as exc:
        raise AdvisorError(
            f"--model {model}: building it to read its dataset sizes failed "
            f"({type(exc).__name__}: {' '.join(str(exc).split())[:200]}).",
            "fix the builder, or pass --n-train N (and --n-val N).",
        ) from exc


def _torch(model: str, batch_size: int) -> BuilderSizes:
    from advisor._lazy import require

    torch = require("torch", "torch", "Reading a PyTorch model's dataset sizes")
    from advisor.probes.torch_loop import build_setup, dataset_size

    with torch.device("meta"):
        setup, _, _ = build_setup(model, batch_size, None, None, 0, None)
    n_train = dataset_size(setup.train_loader)
    n_val = dataset_size(setup.val_loader) if setup.val_loader is not None else 0
    return BuilderSizes(n_train, n_val, "len() of the datasets its builder returns")


def _keras(model: str, batch_size: int) -> BuilderSizes:
    from advisor.search_spaces.workloads import KerasSetup, load_callable

    setup = load_callable(model)(batch_size=batch_size, seed=0)
    if not isinstance(setup, KerasSetup):
        raise AdvisorError(
            f"--model {model} returned {type(setup).__name__}, not a KerasSetup.",
            "return advisor.search_spaces.workloads.KerasSetup(model=..., train=..., ...).",
        )
    if setup.n_train:
        n_val = setup.n_val if setup.n_val is not None else setup.val_samples()
        return BuilderSizes(setup.n_train, n_val, "the n_train/n_val its KerasSetup declares")
    return BuilderSizes(
        setup.train_samples(), setup.val_samples(), "the arrays its KerasSetup holds"
    )
