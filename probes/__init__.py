"""Probes: a few real training iterations, timed, and the models that extrapolate them."""
