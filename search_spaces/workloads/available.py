"""Before any probe runs: is the framework installed, and can the user's module be found?

Both are looked up without importing anything heavy (``importlib.util.find_spec``), so a
typo in ``--model mymodels:build`` or Keras without TensorFlow is one line at once, not the
same failure in every probe process.
"""

from __future__ import annotations

import importlib.util
import os
import sys

from advisor.search_spaces.workloads._registry import import_error

from advisor.errors import AdvisorError

# framework -> the package its probes import first, and the extra that installs it
FRAMEWORK_PACKAGES = {"torch": ("torch", "torch"), "keras": ("tensorflow", "tensorflow")}


def check_framework(framework: str) -> None:
    """Raise AdvisorError when ``framework``'s package is not installed."""
    package, extra = FRAMEWORK_PACKAGES.get(framework, (None, None))
    if package is None or _found(package):
        return
    what = "TensorFlow (Keras)" if framework == "keras" else "PyTorch"
    other = "torch" if framework == "keras" else "keras"
    raise AdvisorError(
        f"--framework {framework} needs {what}, which is not installed.",
        f"pip install 'advisor[{extra}]', or use --framework {other}.",
    )


def check_user_module(path: str) -> None:
    """Raise AdvisorError when the module of ``module:function`` cannot be found, looked up
    as the probe's child process finds it (``python -m`` puts the working directory first; a
    console script's own ``sys.path`` lacks it). An ``hf:`` model needs transformers and
    peft (the ``finetune`` extra)."""
    if path.startswith("hf:"):
        for package in ("transformers", "peft"):
            if not _found(package):
                raise AdvisorError(
                    f"--model {path} needs '{package}', which is not installed.",
                    "pip install 'advisor[finetune]'.",
                )
        return
    module = path.partition(":")[0]
    cwd = os.getcwd()
    added = cwd not in sys.path and "" not in sys.path
    if added:
        sys.path.insert(0, cwd)
    try:
        found = _found(module)
    except ImportError as exc:  # a parent package that does not import
        raise import_error(module, exc) from exc
    finally:
        if added and cwd in sys.path:
            sys.path.remove(cwd)
    if not found:
        raise import_error(module, ModuleNotFoundError(f"No module named '{module}'", name=module))


def _found(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError as exc:  # a parent package is missing
        if exc.name and module.startswith(exc.name):
            return False
        raise
    except ValueError:  # a module whose __spec__ is unset (already imported oddly)
        return True
