"""``python -m fedemu``: the command line."""

import sys

from fedemu.tools.cli import main

sys.exit(main())
