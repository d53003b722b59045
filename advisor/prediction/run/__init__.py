"""The ground of the prediction room: a whole run from a step's phases (the iteration-time model,
``iteration_model``) and the epochs a batch size needs (``epochs_model``, fitted by
``epochs_fit``)."""
