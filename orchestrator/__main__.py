"""`python -m orchestrator ...` = the `orchestrator` console script."""

import sys

from orchestrator.cli import main

sys.exit(main())
