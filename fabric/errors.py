"""The one base exception of fedemu: every user-facing error derives from it (those of a layer above the
fabric live there: ``scenarios.trace.TraceError``, ``tools.run.runner.RunViolation``).

Messages say what is wrong, the value, and what would be right, e.g.
``unknown policy 'minconstraint'; known: min-constraints, random``.
"""


class FedemuError(Exception):
    """A user-facing error: the CLI prints ``fedemu: <label>: <message>`` and exits with status 2."""

    exit_status = 2
    label = "error"


class ConfigError(FedemuError):
    """A scenario parameter, policy name or config value is invalid."""


class JournalError(FedemuError):
    """A journal is truncated, corrupted or of an unknown format."""


def unknown_name(what: str, value: str, known) -> ConfigError:
    """Build the standard 'unknown X' error listing the known names in sorted order."""
    return ConfigError(f"unknown {what} {value!r}; known: {', '.join(sorted(known))}")
