"""The traced step beneath time and memory: the training plan (``plan``) and which plan each
machine runs (``machine_plan``), where a row's batch goes on a machine's devices
(``placement``), the step's operator trace at a per-device batch (``traces``), a probe made
ready for prediction (``ready``, with the input pipeline's time, ``loader``), and the plan's
rewrite of the traced step for its time (``rewrite``)."""
