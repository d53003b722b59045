"""Training as the managed tuning services run it (``python -m advisor.train``).

- ``entry``: the command line, the training loop and the metric reports each service reads;
- ``device``: which device to train on, and data-parallel training over several GPUs;
- ``checkpoint``: per-epoch checkpoints where each service keeps them across restarts.
"""
