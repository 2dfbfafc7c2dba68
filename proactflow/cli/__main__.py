"""`python -m proactflow.cli`: the same as the `proactflow` command."""

import sys

from . import main

sys.exit(main())
