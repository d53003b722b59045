"""A user model's dataset sizes, as its builder gives them (issue #36).

A user builder (``module:function``) returns its data: PyTorch datasets (or DataLoaders)
whose ``len`` is the number of samples, or a ``KerasSetup`` that declares ``n_train``/``n_val``
(the sizes to extrapolate to) or holds arrays whose first axis says them. ``builder_sizes``
builds it once per process and reads them, so ``advisor suggest`` and ``advisor predict``
need ``--n-train``/``--n-val`` only where the builder cannot say (a dataset without a length);
the flags stay overrides. A PyTorch model is built on the meta device (no weights allocated,
as ``advisor.prediction.step.loader`` does), so a model too big for this machine is measured
the same way.
"""

from __future__ import annotations

import functools
import warnings
from dataclasses import dataclass

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
