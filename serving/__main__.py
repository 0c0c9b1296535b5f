"""`python -m serving`: the console command `attention-explorer`."""

import sys

from .command import main

sys.exit(main())
