"""Where training can run: the instance catalog, prices, and the managed tuning back ends."""
