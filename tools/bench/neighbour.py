"""A noisy neighbour for benchmarks: a process that streams through a large array until stopped.

Shared machines run other tenants' work beside ours, and it evicts our data from the shared cache.
``fedemu bench fabric --neighbour MB`` runs one of these beside the benchmark, so the figures under
such load can be measured on purpose rather than met by chance. The neighbour says when its array is
made and streamed once; one that dies first, or during the figures, is a failed bench, never figures
"with a neighbour" that ran alone.
"""

from __future__ import annotations

import contextlib
import select
import subprocess
import sys

from fedemu.fabric.errors import FedemuError

_LOOP = "import numpy as np\na = np.ones({n})\na += 1.0\nprint('ready', flush=True)\nwhile True:\n    a += 1.0\n"
READY_TIMEOUT_S = 120  # far more than filling the largest array allowed (4 GiB) takes


class NeighbourDied(FedemuError):
    """The neighbour process ended before the bench did: its figures were not taken beside it."""

    exit_status = 1
    label = "failed"


def _died(proc: subprocess.Popen, mb: int, when: str) -> NeighbourDied:
    """The error for a neighbour that ended: its exit status and the last line it wrote on stderr."""
    err = proc.stderr.read().decode("utf-8", "replace").strip().splitlines() if proc.stderr else []
    why = f": {err[-1][:200]}" if err else ""
    return NeighbourDied(f"the neighbour process ({mb} MiB) ended {when} (exit status {proc.returncode}{why}); "
                         "no figures are given as measured beside it")


@contextlib.contextmanager
def neighbour(mb: int):
    """Run a process streaming through ``mb`` MiB for the duration of the block (nothing if 0). The block
    starts once the neighbour's array is in place, and gets ``alive()``, which raises NeighbourDied if
    the neighbour has ended since."""
    if mb <= 0:
        yield lambda: None
        return
    proc = subprocess.Popen([sys.executable, "-c", _LOOP.format(n=mb * 1024 * 1024 // 8)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        ready, _, _ = select.select([proc.stdout], [], [], READY_TIMEOUT_S)
        if not ready or proc.stdout.readline().strip() != b"ready":
            with contextlib.suppress(subprocess.TimeoutExpired):  # its output ended: it is ending
                proc.wait(timeout=5 if ready else 0)
            late = proc.poll() is None
            if late:
                proc.kill()
            proc.wait()
            raise _died(proc, mb, f"not ready after {READY_TIMEOUT_S} s, so it was stopped" if late else
                        "before it was ready")

        def alive() -> None:
            if proc.poll() is not None:
                raise _died(proc, mb, "during the bench")

        yield alive
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        for pipe in (proc.stdout, proc.stderr):
            pipe.close()
