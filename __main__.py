"""``python -m fedemu``: the command line."""

from fedemu.tools.cli import entry

entry()
