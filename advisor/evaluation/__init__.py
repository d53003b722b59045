"""Scoring a candidate (machine, batch size, hyperparameters): time, cost, and how we know.

- ``contract``: the values (``WorkloadInfo``, ``Candidate``, ``Evaluation``) and the
  ``Backend`` base class every scoring back end fills in;
- ``local``: the real back end: probes on this machine, the performance model elsewhere;
- ``replay``: a back end serving a recorded table (tests, benchmarks);
- ``prediction``: ``advisor predict``: one probe -> time and cost on machines not probed;
- ``failures``: failed probes as results; ``space_checks``: a space against the catalog;
- ``ranking``: the one rule that orders evaluations (ties, the other metric, Pareto set);
- ``measured``: how a remote measurement enters a local back end's answer.
"""
