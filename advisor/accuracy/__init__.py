"""Short accuracy trials in the study (``advisor suggest --tune TIME``, issue #29).

The machine and batch-size search judges what changes the run time; these trials judge the
hyperparameters that change the accuracy. They train the recommended batch size and its
neighbours briefly on this machine with sampled hyperparameters, report a validation metric
every fraction of an epoch into the same Optuna study (``trial.report``), and are pruned by
Optuna's Hyperband pruner. They are tagged (``advisor.records.ACCURACY``) so that the
machine search, its ranking and its re-run rule never read them.

- ``plan``: what the time buys (data subset, length, checks, batch sizes), stored per study;
- ``lr_rule``: the learning-rate rule across batch sizes, which seeds the search;
- ``trials``: the accuracy trials of a study, read back;
- ``search``: the loop (ask, train, report, prune, write);
- ``evidence``: the best values with their evidence, the rule's check, narrowed ranges;
- ``step``: the step ``advisor.pipeline`` runs after the report's recommendation.
"""
