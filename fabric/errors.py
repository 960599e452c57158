"""The one base exception of fedemu: every user-facing error derives from it.

Messages say what is wrong, the value, and what would be right, e.g.
``unknown policy 'minconstraint'; known: min-constraints, random``.
"""


class FedemuError(Exception):
    """A user-facing error: the CLI prints ``fedemu: <label>: <message>`` and exits with status 2."""

    exit_status = 2
    label = "error"


class ConfigError(FedemuError):
    """A scenario parameter, policy name or config value is invalid."""


class TraceError(FedemuError):
    """A workload trace is malformed; the message is ``FILE:LINE: what is wrong``."""


class JournalError(FedemuError):
    """A journal is truncated, corrupted or of an unknown format."""


class RunViolation(FedemuError):
    """A run ended, but broke an invariant: the verdict names it, the job, task or worker, and the
    virtual time. Exit status 1; the run's results and journal are still written."""

    exit_status = 1
    label = "violation"


def unknown_name(what: str, value: str, known) -> ConfigError:
    """Build the standard 'unknown X' error listing the known names in sorted order."""
    return ConfigError(f"unknown {what} {value!r}; known: {', '.join(sorted(known))}")
