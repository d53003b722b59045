"""Catalog data: ``accelerators.csv`` and one folder per dated price snapshot (CSV per provider)."""
