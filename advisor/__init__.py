"""advisor: where and how to train a model, with the time and the money each choice costs.

Importing this package is cheap: no deep-learning framework or cloud SDK is imported until a
feature needs it.
"""

from advisor.errors import AdvisorError

__version__ = "0.1.0"
__all__ = ["AdvisorError", "__version__"]
