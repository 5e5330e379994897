"""`python -m duetime.cli`: the same as the `duetime` command."""

import sys

from duetime.cli import main

sys.exit(main())
