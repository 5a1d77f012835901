"""`python -m mappa.cli ...`: the `mappa` command."""

import sys

from mappa.cli import main

sys.exit(main())
