"""The cross-device performance model: one local probe -> phase times on any catalog machine.

The front is :mod:`advisor.prediction.perf.model` (re-exported here); the other modules are its
parts: ``signature`` (what is taken from a probe), ``step`` (a probe's operator trace and
loader time, taken once), ``traces`` (the step at a per-device batch), ``loader`` (the input
pipeline timed here), ``cpu`` (CPU targets), ``accel`` (GPUs and TPUs: host and data-parallel
terms), ``device`` (the step's device time: the GPU kernel model, a TPU's roofline),
``phases`` (an accelerator's phases and note), ``startup`` (init and first iteration, measured
or priors), ``calibration`` (measured-vs-predicted corrections), ``ledger`` (the measured runs,
kept in the Optuna storage), ``constants`` (every constant, with its source in
docs/calibration.md), ``report`` (forecasts: the one prediction path of ``advisor predict``,
``advisor suggest``'s scorer and the service), ``types`` (the prediction value).
"""

# The front's names, as its __all__ lists them.
from advisor.prediction.perf.model import *  # noqa: F403
