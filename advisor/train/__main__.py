"""``python -m advisor.train``: the training entry point managed tuning jobs run."""

import sys

from advisor.train.entry import main

sys.exit(main())
