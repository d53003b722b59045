"""The advisor as a shared HTTP service: ``advisor serve``, ``advisor worker``, tokens, client.

Modules: ``db`` (the service's tables beside Optuna's, in the same storage), ``auth`` (hashed
bearer tokens of a team), ``teams`` (who sees which studies), ``jobs`` (job records, leases,
one active job per study enforced by the database), ``fencing`` (a job's writes checked
against its lease), ``runner`` (one job under its lease, storage outages retried),
``dispatch`` (in-process threads or an RQ queue over Redis, and the sweeper), ``outages``
(transient errors, backoff), ``api`` (the one adapter to the advisor's Python API),
``studies`` (a team's studies, read page by page), ``schemas`` (request bodies),
``middleware`` (size limit, access log, error answers), ``app`` (FastAPI), ``server``
(starting the processes), ``client`` (httpx, with retries). Nothing here is imported by
``import advisor``.
"""
