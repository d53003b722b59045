"""Built-in reference workloads (METHOD.md section 6) and user workloads by import path."""

from advisor.search_spaces.workloads._registry import (
    Workload,
    all_workloads,
    get,
    load_callable,
    names,
    register,
)

__all__ = ["Workload", "all_workloads", "get", "load_callable", "names", "register"]
