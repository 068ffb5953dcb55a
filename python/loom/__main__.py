"""python3 -m loom run [OPTIONS] [--] PROGRAM [ARGS...]: see loom._launch.main."""

import sys

from ._launch import main

sys.exit(main())
