"""`python -m duetime.cli`: the `duetime` command, as the console script runs it."""

import sys
import time

from duetime.cli.main import main

if hasattr(time, "tzset"):
    time.tzset()
sys.exit(main())
