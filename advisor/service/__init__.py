"""The advisor as a shared HTTP service: ``advisor serve``, ``advisor worker``, tokens, client.

Modules: ``db`` (the service's tables beside Optuna's, in the same storage), ``auth`` (hashed
bearer tokens), ``jobs`` (job records, one active job per study enforced by the database),
``dispatch`` (in-process threads or an RQ queue over Redis), ``api`` (the one adapter to the
advisor's Python API), ``schemas`` (request bodies), ``app`` (FastAPI), ``client`` (httpx).
Nothing here is imported by ``import advisor``.
"""
