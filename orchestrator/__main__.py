"""`python -m orchestrator ...` = the `orchestrator` console script."""

import sys

from orchestrator.cli.main import main

sys.exit(main())
