"""Where a sweep's runs execute: here, a local process pool (the default) or a Dask cluster (``--cluster``).

Every run is a pure function of its spec (scenario, overrides, seed, its own output folder), so results
do not depend on which executor ran them, how many workers it had or in which order runs finished:
``run_all`` hands each result to ``on_result`` as it arrives (for progress) and returns them in spec
order. The local pool is started with ``spawn`` so no trio or numpy state is inherited. Dask is an
optional extra (``pip install 'fedemu[dask]'``); its workers must be able to import this fedemu. On Dask
each run has a process of its own (``_in_child``), so a worker's memory falls back after every run.
"""

from __future__ import annotations

import contextlib
import functools
import pickle
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence

from fedemu.fabric.atomic import write_bytes
from fedemu.fabric.errors import ConfigError

DASK_HINT = "pip install 'fedemu[dask]' (or: pip install 'dask[distributed]')"


def _indexed(pair):
    """Pool helper: run ``fn(spec)`` and keep the spec's position (module level, so spawn can pickle it)."""
    index, fn, spec = pair
    return index, fn(spec)


def _worker_ignores_interrupts() -> None:
    """Pool initializer: Ctrl-C reaches the whole terminal's process group, and a worker it interrupted
    printed a traceback (``Process SpawnPoolWorker-2: ...``); the parent alone stops, and ends the pool."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _local(specs, fn, jobs: int, note) -> None:
    if jobs <= 1 or len(specs) <= 1:
        for i, spec in enumerate(specs):
            note(i, fn(spec))
        return
    import multiprocessing

    with multiprocessing.get_context("spawn").Pool(processes=min(jobs, len(specs)),
                                                   initializer=_worker_ignores_interrupts) as pool:
        for i, res in pool.imap_unordered(_indexed, [(i, fn, s) for i, s in enumerate(specs)]):
            note(i, res)


def require_dask(address: str | None) -> None:
    """Nothing when ``address`` is None or Dask distributed imports; else a one-line ConfigError saying how
    to install it (checked before a sweep starts)."""
    if address is None:
        return
    try:
        import distributed  # noqa: F401
    except ImportError:
        raise ConfigError(f"--cluster {address}: Dask distributed is not installed; {DASK_HINT}") from None


def dask_client(address: str):
    """A connected ``distributed.Client`` for ``address``, or a one-line ConfigError saying what to do. A
    client whose start failed (no scheduler there, an address without a port, something else answering)
    is put away at once: left to the collector, it would wait 20 s to close a connection it never had, and
    print a Dask TimeoutError traceback as the command exits."""
    require_dask(address)
    import distributed

    made = []

    class _Client(distributed.Client):
        def __init__(self, *args, **kwargs) -> None:
            made.append(self)  # so that a failed start can be put away
            super().__init__(*args, **kwargs)

    try:
        return _Client(address, timeout="10s", set_as_default=False)
    except Exception as e:  # noqa: BLE001 - Dask raises many kinds (OSError, ValueError, a MemoryError on junk)
        for client in made:
            with contextlib.suppress(Exception):
                client.status = "closed"  # what close() checks: nothing left to close
                client._loop_runner.stop()
        made.clear()
        text = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ConfigError(f"--cluster {address}: cannot connect to a Dask scheduler there ({text})") from None


@contextlib.contextmanager
def connected(address: str | None):
    """The Dask client for ``address`` (None: no cluster, None), connected before a sweep writes anything,
    so a bad address leaves nothing behind; closed on the way out."""
    if address is None:
        yield None
        return
    client = dask_client(address)
    try:
        yield client
    finally:
        client.close()


def _in_child(fn, spec: dict) -> dict:
    """Dask task: ``fn(spec)`` in a fresh Python process, whose memory all goes back when it ends. A worker
    that ran large runs itself grew (their cycles went uncollected, see ``compare.run_one``, and Python keeps
    freed memory), reached Dask's pause threshold (80% of its limit) and never ran again: the megha-2023
    paper-scale grid stopped for an hour with 22 runs left."""
    with tempfile.TemporaryDirectory(prefix="fedemu-run-") as tmp:
        job, result = f"{tmp}/job.pickle", f"{tmp}/result.pickle"
        write_bytes(job, pickle.dumps((fn, spec)))
        proc = subprocess.run([sys.executable, "-m", "fedemu.tools.run.pool", job, result], capture_output=True,
                              text=True, stdin=subprocess.DEVNULL)
        if proc.returncode != 0:
            why = proc.stderr.strip() or f"the run's process ended with status {proc.returncode}"
            return {"name": spec.get("name"), "error": why, "config": False}
        with open(result, "rb") as f:
            return pickle.load(f)


def _dask(specs, fn, cluster, note) -> None:
    """Run on the Dask cluster ``cluster``: a client (``connected``), or an address to connect to here."""
    from distributed import as_completed

    with connected(cluster) if isinstance(cluster, str) else contextlib.nullcontext(cluster) as client:
        futures = client.map(functools.partial(_in_child, fn), list(specs), pure=False)
        where = {f.key: i for i, f in enumerate(futures)}
        for fut in as_completed(futures, loop=client.loop):
            note(where[fut.key], fut.result())


@contextlib.contextmanager
def _bar(total: int, enabled: bool):
    """A rich progress bar over runs (with the estimated time left) when stderr is a terminal; in a notebook,
    one drawn into it (``progress.NotebookBar``)."""
    if not enabled:
        yield None
        return
    if not sys.stderr.isatty():
        from .progress import NotebookBar, in_notebook

        yield (NotebookBar(total), None) if in_notebook() else None
        return
    from rich.console import Console
    from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn,
                               TimeRemainingColumn)

    columns = (TextColumn("[bold]runs"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
               TextColumn("left"), TimeRemainingColumn(), TextColumn("{task.fields[last]}"))
    with Progress(*columns, console=Console(file=sys.stderr), transient=True) as bar:
        yield bar, bar.add_task("runs", total=total, last="")


def run_all(specs: Sequence[dict], fn: Callable[[dict], dict], *, jobs: int = 1, cluster=None,
            on_result: Callable[[int, dict], None] | None = None, progress: bool = True) -> list[dict]:
    """``fn(spec)`` for every spec, on a local pool of ``jobs`` processes or the Dask scheduler ``cluster``
    (a client from ``connected``, or its address); returns the results in spec order. ``fn`` must be a
    module-level function."""
    results: list = [None] * len(specs)
    with _bar(len(specs), progress) as bar:
        def note(i: int, res) -> None:
            results[i] = res
            if bar is not None:
                bar[0].update(bar[1], advance=1, last=str(res.get("name", "")) if isinstance(res, dict) else "")
            if on_result is not None:
                on_result(i, res)

        if cluster:
            _dask(specs, fn, cluster, note)
        else:
            _local(specs, fn, jobs, note)
    return results


if __name__ == "__main__":  # _in_child's process: python -m fedemu.tools.run.pool JOB RESULT
    with open(sys.argv[1], "rb") as f:
        _fn, _spec = pickle.load(f)
    write_bytes(sys.argv[2], pickle.dumps(_fn(_spec)))
