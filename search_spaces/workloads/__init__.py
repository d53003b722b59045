"""Built-in reference workloads (docs/method.md section 6) and user workloads by import path."""

from advisor.search_spaces.workloads._registry import (
    Workload,
    all_workloads,
    get,
    load_callable,
    names,
    register,
)
from advisor.search_spaces.workloads.ref import ModelRef
from advisor.search_spaces.workloads.setups import KerasSetup, TorchSetup

__all__ = [
    "KerasSetup",
    "ModelRef",
    "TorchSetup",
    "Workload",
    "all_workloads",
    "get",
    "load_callable",
    "names",
    "register",
]
