"""Declarative joint search spaces (machine x batch size x hyperparameters) and built-in workloads."""
