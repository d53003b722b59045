"""Managed hyperparameter tuning jobs (SageMaker, Vertex AI, Azure ML) from a study.

- ``jobs``: plan, submit, follow and import a job (the Python API of ``advisor submit``);
- ``spec``: the provider-neutral ``TuningSpec`` from a study's recommendation or a machine;
- ``import_results``: the job's training jobs as trials of the same study;
- ``calibration``: imported trials' measured step times into the calibration ledger.
"""
