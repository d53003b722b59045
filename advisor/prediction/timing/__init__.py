"""A step's time on a machine, beside its memory (``advisor.prediction.memory``): one local
probe -> phase times on any catalog machine.

The front is :mod:`advisor.prediction.timing.model` (``predict``, ``predict_phases``); its
parts: ``signature`` (what is taken from a probe), ``cpu`` (CPU targets), ``accel`` (GPUs and
TPUs: host and data-parallel terms), ``device`` (the step's device time: the GPU kernel
model, a TPU's roofline), ``phases`` (an accelerator's phases and note), ``startup`` (init and
first iteration, measured or priors), ``correction`` (measured-vs-predicted corrections),
``ledger`` (the measured runs, kept in the Optuna storage), ``constants`` (every constant,
with its source in docs/calibration.md), ``types`` (the prediction value). The traced step it
reads is ``advisor.prediction.step``'s.
"""
