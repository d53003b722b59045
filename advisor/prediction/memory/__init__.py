"""A step's memory per device, beside its time (``advisor.prediction.timing``): the model and
its fit (``model``), the GPU's priors (``priors``), the memory under a plan -- the step
``advisor.train`` runs, traced (``plan``) -- and one machine's memory per device (``device``)."""
