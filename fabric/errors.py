"""The one base exception of fedemu: every user-facing error derives from it.

Messages say what is wrong, the value, and what would be right, e.g.
``unknown policy 'minconstraint'; known: min-constraints, random``.
"""


class FedemuError(Exception):
    """A user-facing error: the CLI prints its message and exits with status 2."""

    exit_status = 2


class ConfigError(FedemuError):
    """A scenario parameter, policy name or config value is invalid."""


class TraceError(FedemuError):
    """A workload trace is malformed; the message is ``FILE:LINE: what is wrong``."""


class JournalError(FedemuError):
    """A journal is truncated, corrupted or of an unknown format."""


def unknown_name(what: str, value: str, known) -> ConfigError:
    """Build the standard 'unknown X' error listing the known names in sorted order."""
    return ConfigError(f"unknown {what} {value!r}; known: {', '.join(sorted(known))}")
