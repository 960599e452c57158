"""A noisy neighbour for benchmarks: a process that streams through a large array until stopped.

Shared machines run other tenants' work beside ours, and it evicts our data from the shared cache.
``fedemu bench fabric --neighbour MB`` runs one of these beside the benchmark, so the figures under
such load can be measured on purpose rather than met by chance.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys

_LOOP = "import numpy as np\na = np.ones({n})\nwhile True:\n    a += 1.0\n"


@contextlib.contextmanager
def neighbour(mb: int):
    """Run a process streaming through ``mb`` MiB for the duration of the block (nothing if 0)."""
    if mb <= 0:
        yield
        return
    proc = subprocess.Popen([sys.executable, "-c", _LOOP.format(n=mb * 1024 * 1024 // 8)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        yield
    finally:
        proc.kill()
        proc.wait()
