"""What ``advisor suggest`` shows: the report built from a study's outcome.

- ``build``: the report document (ranking, picks, Pareto set, epoch sweep, notes);
- ``rows``: one row per scored candidate; ``epochs``: epochs per batch size;
  ``overheads``: the start-up terms of each service;
- ``render``: the report in the terminal; ``plot``: the cost vs run time plot (PNG, HTML);
- ``dashboard``: what optuna-dashboard shows of the advisor's storage, and the study note.
"""
