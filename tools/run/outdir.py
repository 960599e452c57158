"""Output folders: checked before a run starts, and not left behind empty when the run is refused.

``fedemu run --out D`` and ``fedemu compare --out D`` call ``prepared(D)`` around the run. It creates D
(or checks that an existing D is a writable folder) before anything is simulated, so a write-protected
folder or a read-only filesystem is a one-line error at once, not after the run. If the run then fails
and D was created for it and is still empty, D is removed again.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import stat
import sys
from pathlib import Path

from fedemu.fabric.atomic import STDOUT, PendingFile, check_target
from fedemu.fabric.errors import ConfigError

DEFAULT_ROOT = "out"  # where runs write when no --out is given but something must be written (git ignores it)

# What one run's folder holds (tools/results/results.py, then the journal), and what compare adds at its top.
RESULT_FILES = ("summary.json", "jobs.csv", "tasks.csv", "utilization.csv", "balance.csv", "delay_cdf.png",
                "imbalance.png", "share_over_time.png")
JOURNAL_FILE = "messages.log"
RUN_FILES = frozenset(RESULT_FILES) | {JOURNAL_FILE}
COMPARE_PLAN = "compare.json"  # the runs an earlier compare planned: what --force may remove, what a rerun resumes
COMPARE_FILES = frozenset({"compare.csv", "delay_cdf.png", "utilization_cdf.png", COMPARE_PLAN})


def default_run_dir(scenario: str, seed: int) -> str:
    """``out/<scenario>-seed<N>``: the folder of a run that must write (``--record``) but got no ``--out``."""
    return os.path.join(DEFAULT_ROOT, f"{Path(scenario).stem}-seed{seed}")


def _check_writable(path: Path, option: str) -> None:
    """Create and remove a probe file in ``path``: the one sure test that writing there works."""
    try:
        PendingFile(path / ".fedemu-probe").abort()
    except OSError as e:
        raise ConfigError(f"{option} {path}: cannot write there: {e.strerror or e}") from None


def check_file(file, option: str) -> None:
    """Refuse, before the run, an output file (``--journal``, ``--log``) that cannot be written: a folder,
    something that is not a regular file (a symlink, a device), a missing or write-protected parent folder
    (by mode, even for root), or one the probe cannot write."""
    if file is None:
        return
    path = Path(file)
    parent = path.parent
    if path.is_dir():
        raise ConfigError(f"{option} {file} is a folder; expected the path of a file")
    check_target(path, option, stdout_ok=option in STDOUT_OPTIONS)
    if not parent.is_dir():
        what = f"{parent} is a file, not a folder" if parent.exists() else f"the folder {parent} does not exist"
        raise ConfigError(f"{option} {file}: {what}")
    if not parent.stat().st_mode & 0o222:
        raise ConfigError(f"{option} {file}: {parent} is write-protected (mode {parent.stat().st_mode & 0o777:o})")
    _check_writable(parent, f"{option} {file}:")


STDOUT_OPTIONS = ("--log",)  # the output files that may be standard output (``-``): text, written in order


def _spot(path) -> str:
    """Where a path leads: its folder's real path and its own name (two spellings of one file agree)."""
    path = os.path.abspath(path)
    return os.path.join(os.path.realpath(os.path.dirname(path)), os.path.basename(path))


def check_out(out, option: str = "--out") -> None:
    """Refuse an empty folder name (it would write nothing, or into the current folder by accident)."""
    if out is not None and not str(out).strip():
        raise ConfigError(f"{option} {out!r}: expected the path of a folder")


def check_outputs(out, files: dict, *, probe: bool = True) -> None:
    """Refuse, before a run, output files (``{"--journal": path, "--log": path}``, None: not written) that
    share one path, that are one of the run's own result files in ``out`` (which would overwrite them,
    or be overwritten) or (``probe``, once ``out`` is made) that cannot be written (``check_file``).
    ``-`` is standard output where the option allows it (``STDOUT_OPTIONS``)."""
    check_out(out)
    results = {_spot(os.path.join(out, name)): name for name in RESULT_FILES} if out else {}
    seen: dict[str, str] = {}
    for option, path in files.items():
        if path is None:
            continue
        if path == STDOUT:
            if option not in STDOUT_OPTIONS:
                raise ConfigError(f"{option} {STDOUT}: this output cannot go to standard output (a journal is "
                                  "binary and read back by seeking); give the path of a file")
            continue
        if not str(path).strip():
            raise ConfigError(f"{option} {path!r}: expected the path of a file")
        spot = _spot(path)
        if spot in seen:
            raise ConfigError(f"{option} {path} is also {seen[spot]}: each output needs a path of its own")
        if spot in results:
            raise ConfigError(f"{option} {path} is the run's own {results[spot]} in --out {out}, which the "
                              "results would overwrite; choose another path")
        seen[spot] = f"{option} {path}"
        if probe:
            check_file(path, option)


def _identity(path):
    """(device, inode) of an existing file (following links: what would be read), else None."""
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    return st.st_dev, st.st_ino


def check_inputs(out, files: dict, inputs: dict) -> None:
    """Refuse, before a run, an output that is one of its inputs: ``files`` as for ``check_outputs`` (and,
    with ``out``, each run file written there), ``inputs`` ``{what: path}`` (None: none). Two paths are one
    file when they lead to the same place (links and ``..`` resolved) or are hard links of one file."""
    outputs = {option: path for option, path in files.items() if path is not None and path != STDOUT}
    if out:
        outputs.update({f"--out {out} (its {name})": os.path.join(out, name) for name in sorted(RUN_FILES)})
    given = {what: (os.path.realpath(path), _identity(path)) for what, path in inputs.items() if path is not None}
    for option, path in outputs.items():
        spot, ident = os.path.realpath(path), _identity(path)
        for what, (their_spot, their_ident) in given.items():
            if spot == their_spot or (ident is not None and ident == their_ident):
                shown = option if option.startswith("--out") else f"{option} {path}"
                raise ConfigError(f"{shown} is {what}, which this command reads: writing there would destroy it; "
                                  "choose another path")


def compare_plan(path: Path):
    """The runs an earlier compare in ``path`` planned (its ``compare.json``), or None when there is none
    or it cannot be read."""
    try:
        with open(path / COMPARE_PLAN, encoding="utf-8") as f:
            plan = json.loads(f.read(MAX_PLAN_BYTES))
    except (OSError, ValueError):
        return None
    return plan if isinstance(plan, dict) and isinstance(plan.get("runs"), list) else None


MAX_PLAN_BYTES = 16 << 20  # a compare.json larger than this is not one compare wrote


def _is_ours(entry: Path, runs: set) -> bool:
    """Whether ``entry`` is something the earlier compare wrote: its files, or one of its run folders
    holding only a run's files."""
    if entry.is_symlink():
        return False
    if entry.is_file():
        return entry.name in COMPARE_FILES
    if entry.is_dir() and entry.name in runs:
        return all(f.is_file() and not f.is_symlink() and f.name in RUN_FILES for f in entry.iterdir())
    return False


def clear_compare(path: Path, force: bool) -> None:
    """Make a reused compare folder empty: refused without ``force``; with it, only what the earlier
    compare wrote (its ``compare.json`` names its run folders) is removed, and a folder holding anything
    else, or no ``compare.json``, is refused."""
    entries = sorted(path.iterdir())
    if not entries:
        return
    if not force:
        raise ConfigError(f"--out {path} is not empty ({len(entries)} entries, e.g. {entries[0].name}); "
                          "give --force to replace an earlier compare's results, or choose another folder")
    plan = compare_plan(path)
    if plan is None:
        raise ConfigError(f"--out {path} holds no {COMPARE_PLAN}, so it is not an earlier compare's folder; "
                          "--force replaces only compare's own results: choose another folder")
    runs = {str(r.get("name")) for r in plan["runs"] if isinstance(r, dict)}
    foreign = [e.name for e in entries if not _is_ours(e, runs)]
    if foreign:
        raise ConfigError(f"--out {path} holds files compare did not write ({', '.join(foreign[:3])}); "
                          "--force replaces only compare's own results: choose another folder")
    for e in entries:
        if e.is_dir():
            shutil.rmtree(e)
        else:
            e.unlink()


def _run_files(out) -> dict:
    """The run files (``RUN_FILES``) in folder ``out`` that are regular files, each with its identity
    (device, inode, modification time): a file written again is a new file, by the atomic rename."""
    found = {}
    for name in sorted(RUN_FILES):
        try:
            st = os.lstat(os.path.join(out, name))
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode):
            found[name] = (st.st_dev, st.st_ino, st.st_mtime_ns)
    return found


@contextlib.contextmanager
def owned(out):
    """A run owns its ``--out`` folder: once the block is left, if the run wrote any of its files there
    (results, or a journal that a failed run keeps), the run files an earlier run left and this one did not
    write again (``messages.log`` of a recorded run, ``share_over_time.png`` of one with users ...) are
    removed, and named in a note, so the folder never mixes two runs. A run refused before it wrote
    anything leaves the folder as it was. Only fedemu's own file names are touched (``RUN_FILES``)."""
    if out is None:
        yield
        return
    before = _run_files(out)
    try:
        yield
    finally:
        after = _run_files(out)
        if any(before.get(name) != ident for name, ident in after.items()):  # this run wrote here
            stale = [name for name, ident in before.items() if after.get(name) == ident]
            for name in stale:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(os.path.join(out, name))
            if stale:
                print(f"fedemu: note: removed from {out} what an earlier run wrote there and this run did not: "
                      f"{', '.join(stale)}", file=sys.stderr)


@contextlib.contextmanager
def prepared(out, *, option: str = "--out"):
    """Yield ``out`` created (or found) and writable; on an error remove it if it was made here and is empty.
    ``out`` None yields None."""
    if out is None:
        yield None
        return
    check_out(out, option)
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
        yield out
    except BaseException:
        with contextlib.suppress(OSError):  # rmdir removes only empty folders: a failed run's journal stays
            for p in made:
                p.rmdir()
        raise
