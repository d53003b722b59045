"""The joint Optuna study: machine x batch size x hyperparameters, and how it is run.

- ``run``: open or resume the study, screen every (machine, batch), run the trial loop;
- ``loop``: one trial at a time: choose, claim, score, write;
- ``state``: what the study already knows, re-read from the storage;
- ``planner``: which (machine, batch) a trial evaluates next, best-first from the screen;
- ``samplers``: Optuna's samplers (and a scikit-optimize adapter) for the hyperparameters;
- ``claims``: several processes on one study never evaluate the same configuration;
- ``naming``: the study's name, from what was asked;
- ``selection``: the recommended, fastest and cheapest trials and the Pareto front.
"""
