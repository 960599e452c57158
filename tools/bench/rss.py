"""Peak resident memory of this process, for the benchmarks."""

from __future__ import annotations

import resource


def peak_rss_mb() -> float:
    """This process's peak resident memory in MB. Linux's VmHWM, which starts afresh at exec
    (getrusage's maxrss does not: a child inherits its parent's peak), else getrusage."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
