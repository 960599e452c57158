"""A rich progress bar on stderr: virtual time and jobs done of the total (the only place that reads wall time).

It appears only when stderr is a terminal and ``--quiet`` is not given, so logs and pipes stay clean. In a
notebook, ``fedemu.compare`` draws its bar over runs into the notebook instead (``NotebookBar``).
"""

from __future__ import annotations

import contextlib
import html
import sys
import time

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


def in_notebook() -> bool:
    """Whether this runs in a Jupyter kernel (or Colab), where a bar is drawn into the notebook, not stderr."""
    shell = sys.modules.get("IPython")
    try:
        ipython = shell.get_ipython() if shell is not None else None
    except Exception:  # noqa: BLE001 - an IPython too old or too odd to ask: no notebook bar
        return False
    return ipython is not None and (type(ipython).__name__ == "ZMQInteractiveShell"
                                    or "google.colab" in str(type(ipython)))


class NotebookBar:
    """A progress bar over runs in a notebook: one HTML line (a ``<progress>`` element, runs done of the
    total, elapsed and estimated time left, the last run), updated in place through IPython's display
    (no widget library needed). Its ``update(task, advance=, last=)`` is rich's, as ``tools.run.pool`` calls it."""

    def __init__(self, total: int) -> None:
        from IPython.display import HTML, display

        self.total, self.done, self.last = total, 0, ""
        self._html = HTML
        self._t0 = time.monotonic()
        self._handle = display(HTML(self._text()), display_id=True)

    def _text(self) -> str:
        elapsed = time.monotonic() - self._t0
        left = f", about {elapsed / self.done * (self.total - self.done):.0f} s left" if self.done else ""
        last = f" ({html.escape(self.last)})" if self.last else ""
        return (f"<progress value='{self.done}' max='{max(self.total, 1)}' style='width: 40%'></progress> "
                f"runs {self.done}/{self.total}: {elapsed:.0f} s{left}{last}")

    def update(self, task=None, *, advance: int = 0, last: str = "") -> None:
        self.done += advance
        self.last = last or self.last
        if self._handle is not None:
            self._handle.update(self._html(self._text()))
