"""Output folders: checked before a run starts, and not left behind empty when the run is refused.

``fedemu run --out D`` and ``fedemu compare --out D`` call ``prepared(D)`` around the run. It creates D
(or checks that an existing D is a writable folder) before anything is simulated, so a write-protected
folder or a read-only filesystem is a one-line error at once, not after the run. If the run then fails
and D was created for it and is still empty, D is removed again.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from pathlib import Path

from fedemu.fabric.errors import ConfigError

DEFAULT_ROOT = "out"  # where runs write when no --out is given but something must be written (git ignores it)

# What one run's folder holds (tools/results.py and the journal), and what compare adds at its top.
RUN_FILES = frozenset({"summary.json", "jobs.csv", "tasks.csv", "utilization.csv", "balance.csv", "delay_cdf.png",
                       "imbalance.png",
                       "messages.log"})
COMPARE_FILES = frozenset({"compare.csv", "delay_cdf.png", "utilization_cdf.png"})


def default_run_dir(scenario: str, seed: int) -> str:
    """``out/<scenario>-seed<N>``: the folder of a run that must write (``--record``) but got no ``--out``."""
    return os.path.join(DEFAULT_ROOT, f"{Path(scenario).stem}-seed{seed}")


def _check_writable(path: Path, option: str) -> None:
    """Create and remove a probe file in ``path``: the one sure test that writing there works."""
    try:
        fd, probe = tempfile.mkstemp(prefix=".fedemu-probe-", dir=path)
    except OSError as e:
        raise ConfigError(f"{option} {path}: cannot write there: {e.strerror or e}") from None
    os.close(fd)
    os.unlink(probe)


def check_file(file, option: str) -> None:
    """Refuse, before the run, an output file (``--journal``, ``--log``) that cannot be written: a folder,
    a missing or write-protected parent folder (by mode, even for root), or one the probe cannot write."""
    if file is None:
        return
    path = Path(file)
    parent = path.parent
    if path.is_dir():
        raise ConfigError(f"{option} {file} is a folder; expected the path of a file")
    if not parent.is_dir():
        what = f"{parent} is a file, not a folder" if parent.exists() else f"the folder {parent} does not exist"
        raise ConfigError(f"{option} {file}: {what}")
    if not parent.stat().st_mode & 0o222:
        raise ConfigError(f"{option} {file}: {parent} is write-protected (mode {parent.stat().st_mode & 0o777:o})")
    _check_writable(parent, f"{option} {file}:")


def _is_ours(entry: Path) -> bool:
    """Whether ``entry`` is something an earlier ``fedemu compare`` wrote: its files or a run folder."""
    if entry.is_file():
        return entry.name in COMPARE_FILES
    if entry.is_dir() and not entry.is_symlink():
        return all(f.is_file() and f.name in RUN_FILES for f in entry.iterdir())
    return False


def clear_compare(path: Path, force: bool) -> None:
    """Make a reused compare folder empty: refused without ``force``; with it, only compare's own outputs
    are removed, and a folder holding anything else is refused."""
    entries = sorted(path.iterdir())
    if not entries:
        return
    if not force:
        raise ConfigError(f"--out {path} is not empty ({len(entries)} entries, e.g. {entries[0].name}); "
                          "give --force to replace an earlier compare's results, or choose another folder")
    foreign = [e.name for e in entries if not _is_ours(e)]
    if foreign:
        raise ConfigError(f"--out {path} holds files compare did not write ({', '.join(foreign[:3])}); "
                          "--force replaces only compare's own results: choose another folder")
    for e in entries:
        if e.is_dir():
            shutil.rmtree(e)
        else:
            e.unlink()


@contextlib.contextmanager
def prepared(out, *, option: str = "--out", compare: bool = False, force: bool = False):
    """Yield ``out`` created (or found) and writable; on an error remove it if it was made here and is empty.

    ``compare`` asks for an empty folder (see ``clear_compare``). ``out`` None yields None.
    """
    if out is None:
        yield None
        return
    path = Path(out)
    if path.exists() and not path.is_dir():
        raise ConfigError(f"{option} {out} is a file, not a folder")
    made = [p for p in (path, *path.parents) if not p.exists()]  # the folders created here, deepest first
    base = made[-1].parent if made else path  # the folder written to, or the one new folders go into
    if not base.stat().st_mode & 0o222:  # no write bit for anyone: refused even for root, who could write
        which = "the folder" if base == path else str(base)
        raise ConfigError(f"{option} {out}: {which} is write-protected (mode {base.stat().st_mode & 0o777:o})")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ConfigError(f"{option} {out}: cannot create the folder: {e.strerror or e}") from None
    try:
        _check_writable(path, option)
        if compare:
            clear_compare(path, force)
        yield out
    except BaseException:
        with contextlib.suppress(OSError):  # rmdir removes only empty folders: a failed run's journal stays
            for p in made:
                p.rmdir()
        raise
