"""The models that predict a training run from a probe, each in one module or folder.

- ``iteration_model``: a whole run's time from a probe's phases (init, first iteration,
  steady iterations, validation passes).
- ``epochs_model`` / ``epochs_fit``: epochs to the target accuracy per batch size.
- ``perf``: a step on another machine (the one prediction path: ``forecast.forecast``), its
  start-up and the calibration ledger's correction.
- ``kernels``: the GPU kernel model the step's device time comes from.
"""
