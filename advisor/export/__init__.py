"""Issue #37: the report's recommendation (or any ranked row) as something that runs it.

``advisor export`` and ``advisor suggest --export`` write the chosen row as a SkyPilot task
YAML (``advisor.export.skypilot``) or as a managed service's single training-job request built
with that SDK's own types (``advisor.export.services``: a SageMaker ``CreateTrainingJob``
request, a Vertex AI ``CustomJob``, an Azure ML command job). ``advisor.export.api`` finds the
row (``advisor.export.row``) and writes the file whole or not at all.
"""
