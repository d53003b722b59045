"""The cross-device performance model: one local probe -> phase times on any catalog machine.

The front is :mod:`advisor.probes.perf.model` (re-exported here); the other modules are its
parts: ``signature`` (what is taken from a probe), ``cpu`` (CPU targets), ``accel`` (GPUs and
TPUs), ``calibration`` (measured-vs-predicted corrections), ``ledger`` (the measured runs, kept
in the Optuna storage), ``constants`` (every constant, with its source in
docs/calibration.md), ``trace`` (op counts of one step), ``report`` (forecasts for
``advisor predict``), ``types`` (the prediction value).
"""

from advisor.probes.perf.model import (
    AcceleratorLookup,
    Prediction,
    calibrate_from,
    device_class,
    predict,
    predict_phases,
    predict_phases_for_batch,
    record_measurement,
    record_run,
)

__all__ = [
    "AcceleratorLookup",
    "Prediction",
    "calibrate_from",
    "device_class",
    "predict",
    "predict_phases",
    "predict_phases_for_batch",
    "record_measurement",
    "record_run",
]
