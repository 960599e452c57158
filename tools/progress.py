"""A rich progress bar on stderr: virtual time and jobs done of the total (the only place that reads wall time).

It appears only when stderr is a terminal and ``--quiet`` is not given, so logs and pipes stay clean.
"""

from __future__ import annotations

import contextlib
import sys

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn


@contextlib.contextmanager
def progress_bar(enabled: bool = True):
    """Yields a callback ``(fabric, run)`` for the fabric's progress hook, or None when disabled."""
    if not enabled or not sys.stderr.isatty():
        yield None
        return
    console = Console(file=sys.stderr)
    columns = (TextColumn("[bold]{task.description}"), BarColumn(), TextColumn("{task.fields[status]}"),
               TimeElapsedColumn())
    with Progress(*columns, console=console, transient=True) as bar:
        task = bar.add_task("running", total=None, status="")

        def update(fabric, run):
            done, total = getattr(run, "progress", lambda: (None, None))()
            total = getattr(run, "total_jobs", None) or total  # the workload's size, known from the start
            status = f"virtual {fabric.now / 1e6:,.1f}s  events {fabric.events:,}"
            if total:
                status += f"  jobs {done:,}/{total:,}"
                bar.update(task, total=total, completed=done, status=status)
            else:
                bar.update(task, status=status)

        yield update


