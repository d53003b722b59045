"""The top of the prediction room: one machine's run forecast -- its time, its memory and its
price under the fastest training plan that fits (``forecast.forecast_machine``, the one
prediction path; ``plan_search.best_forecast``, the plan)."""
