"""Issue 47's whole-process table: an older checkout against this one, run by run, with paired ratios.

Each round runs every case as ``fedemu run`` in a process of its own, in a fixed order: the older tree on
trio, then this tree on each engine; under each bytecode condition in turn. What each process took (user +
system CPU, peak resident memory) comes from ``os.wait4``, and its digest from its summary.json.

- ``src``: every process compiles the trees' own modules (``PYTHONDONTWRITEBYTECODE=1``); the
  dependencies' bytecode is as pip installed it.
- ``cache``: every module's bytecode cached in a folder per tree (``PYTHONPYCACHEPREFIX``), warmed first.

The machine moves one process by more than a tenth, so a ratio is read from pairs: this tree's run over the
older tree's run of the same round and condition, and the median of those (docs/performance.md).
The cases need the YH1_sub trace (``../shared/data``); ``--trace`` names another copy.

    python -m fedemu.tools.bench.paired --base ../old/fedemu --rounds 3 --out rows.tsv

A run that fails, or runs past an hour, stops the bench with its command (exit 1); digests that differ
within a case are reported, and the exit status is 1.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

from fedemu.fabric.atomic import write_text
from fedemu.fabric.errors import ConfigError

from .digests import ROOT, YH1

CASES = {  # issue 47's shapes: Sparrow at 10,000 workers, Pigeon at 1,000 (10 x 100), Megha at 1,000 (10 x 10 x 10)
    "sparrow": {"scheduler": "sparrow", "gms": 10, "lms": 10, "workers_per_partition": 100},
    "pigeon": {"scheduler": "pigeon", "gms": 1, "lms": 10, "workers_per_partition": 100},
    "megha": {"scheduler": "megha", "gms": 10, "lms": 10, "workers_per_partition": 10},
}
CONDITIONS = ("src", "cache")
ENGINES = ("trio", "direct")
RUN_LIMIT_S = 3600  # a run past this is stopped and the bench ends with its name (the cases take a minute at most)


def command(case: str, trace: Path, jobs: int, engine: str | None, out: Path) -> list[str]:
    """The ``fedemu run`` of a case; ``engine`` None passes no ``--engine`` (trees older than the option)."""
    sets = {**CASES[case], "workload": "trace", "trace": str(trace), "jobs": jobs, "cost_model": "zero"}
    cmd = [sys.executable, "-m", "fedemu", "run", "default", "--quiet", "--seed", "1"]
    for key, value in sets.items():
        cmd += ["--set", f"{key}={value}"]
    return cmd + (["--engine", engine] if engine else []) + ["--out", str(out)]


def measure(cmd: list[str], env: dict, cwd: Path, limit_s: float = RUN_LIMIT_S) -> tuple[float, int]:
    """Run ``cmd`` to its end, or stop it after ``limit_s`` seconds: (user + system CPU in seconds, peak
    resident memory in KiB)."""
    proc = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    stopped = []

    def stop() -> None:
        stopped.append(limit_s)
        proc.kill()

    timer = threading.Timer(limit_s, stop)
    timer.start()
    try:
        err = proc.stderr.read()
        proc.stderr.close()
        _, status, usage = os.wait4(proc.pid, 0)  # the child's own usage (Popen.wait would not give it)
    finally:
        timer.cancel()
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        why = f"was stopped after {limit_s:g} s" if stopped else f"exited with {proc.returncode}"
        raise RuntimeError(f"{' '.join(cmd[2:])} {why}: {err.decode()[-400:]}")
    return usage.ru_utime + usage.ru_stime, usage.ru_maxrss


def _environ(tree_path: Path, condition: str, cache: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX")}
    env["PYTHONPATH"] = str(tree_path)
    if condition == "src":
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    else:
        env["PYTHONPYCACHEPREFIX"] = str(cache)
    return env


def _importable(checkout: Path, into: Path, name: str) -> Path:
    """A folder from which ``import fedemu`` finds ``checkout`` (whatever the checkout's folder is called)."""
    root = into / name
    root.mkdir()
    (root / "fedemu").symlink_to(checkout.resolve(), target_is_directory=True)
    return root


def run(base: Path, rounds: int, cases, conditions, trace: Path, jobs: int, say=print) -> list[tuple]:
    """The rows ``(round, case, condition, tree, engine, cpu_s, peak_kib, digest)``, each handed to ``say``
    as a tab-separated line as it comes."""
    rows = []
    with tempfile.TemporaryDirectory(prefix="fedemu-paired-") as tmp:
        tmp = Path(tmp)
        trees = {"base": _importable(base, tmp, "base"), "this": _importable(ROOT, tmp, "this")}
        runs = [("base", None), *(("this", engine) for engine in ENGINES)]
        work = tmp / "work"
        work.mkdir()
        if "cache" in conditions:  # warm each tree's bytecode cache with a short run of every case
            for tree, path in trees.items():
                for case in cases:
                    measure(command(case, trace, 2, None, work / f"warm-{tree}-{case}"),
                            _environ(path, "cache", tmp / f"pyc-{tree}"), work)
        for r in range(1, rounds + 1):
            for case in cases:
                for condition in conditions:
                    for tree, engine in runs:
                        folder = work / f"{r}-{case}-{condition}-{tree}-{engine or 'trio'}"
                        env = _environ(trees[tree], condition, tmp / f"pyc-{tree}")
                        cpu, peak = measure(command(case, trace, jobs, engine if engine != "trio" else None, folder),
                                            env, work)
                        digest = json.loads((folder / "summary.json").read_text())["digest"]
                        row = (r, case, condition, tree, engine or "trio", round(cpu, 2), peak, digest)
                        rows.append(row)
                        say(_line(row))
    return rows


def _line(row) -> str:
    return "\t".join(map(str, row))


def paired(rows) -> dict:
    """Per (case, engine): this tree's CPU over the older tree's in the same round and condition, sorted,
    with their median; and each tree's peak memory (KiB, the largest) and the digests seen."""
    base = {(r[0], r[1], r[2]): r[5] for r in rows if r[3] == "base"}
    out = {}
    for case in dict.fromkeys(r[1] for r in rows):
        for engine in ENGINES:
            ratios = sorted(r[5] / base[(r[0], r[1], r[2])] for r in rows
                            if r[1] == case and r[3] == "this" and r[4] == engine and (r[0], r[1], r[2]) in base)
            if ratios:
                out[(case, engine)] = {"ratios": ratios, "median": statistics.median(ratios)}
        for tree, engine in (("base", "trio"), ("this", "trio"), ("this", "direct")):
            peaks = [r[6] for r in rows if r[1] == case and r[3] == tree and r[4] == engine]
            if peaks:
                out.setdefault((case, "peak_kib"), {})[f"{tree} {engine}"] = max(peaks)
        out[(case, "digests")] = sorted({r[7] for r in rows if r[1] == case})
    return out


def report(rows) -> str:
    """The paired ratios, peaks and digests as text, a case a line."""
    got = paired(rows)
    lines = []
    for case in dict.fromkeys(r[1] for r in rows):
        parts = [case]
        for engine in ENGINES:
            p = got.get((case, engine))
            if p:
                parts.append(f"{engine} {p['median']:.2f} ({' '.join(f'{x:.2f}' for x in p['ratios'])})")
        peaks = got.get((case, "peak_kib"), {})
        parts.append("peak MiB " + ", ".join(f"{k} {v / 1024:.0f}" for k, v in peaks.items()))
        digests = got[(case, "digests")]
        parts.append("digest " + (digests[0][:8] if len(digests) == 1 else f"DIFFERS: {', '.join(digests)}"))
        lines.append(" | ".join(parts))
    return "\n".join(lines)


def differing(rows) -> list[str]:
    """The cases whose runs did not all give one digest: the two trees (or the engines) did not run the same
    work, so their ratios compare different runs."""
    return [case for case in dict.fromkeys(r[1] for r in rows) if len({r[7] for r in rows if r[1] == case}) > 1]


def _names(text: str, known, what: str) -> tuple[str, ...]:
    names = tuple(n for n in text.split(",") if n)
    for n in names:
        if n not in known:
            raise ConfigError(f"--{what} {n!r}: known: {', '.join(known)}")
    return names


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", required=True, help="the older checkout (its folder holds fedemu's __init__.py)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--cases", default=",".join(CASES), help=f"comma-separated, of {', '.join(CASES)}")
    parser.add_argument("--conditions", default=",".join(CONDITIONS), help="comma-separated, of src, cache")
    parser.add_argument("--trace", default=str(YH1), help="the YH1_sub trace (default: ../shared/data's)")
    parser.add_argument("--jobs", type=int, default=0, help="the trace's first jobs (0: all, the issue's cases)")
    parser.add_argument("--out", help="a file for the rows, one tab-separated row a line (written at the end; "
                        "standard output has each row as it comes)")
    args = parser.parse_args(argv)
    try:
        cases = _names(args.cases, CASES, "cases")
        conditions = _names(args.conditions, CONDITIONS, "conditions")
        base, trace = Path(args.base), Path(args.trace)
        if not (base / "__init__.py").is_file() or not (base / "fabric").is_dir():
            raise ConfigError(f"--base {base}: not a fedemu checkout (no __init__.py and fabric/ in it)")
        if not trace.is_file():
            raise ConfigError(f"--trace {trace}: no such file (the cases run YH1_sub; see ../shared/data)")
        if args.rounds < 1 or args.jobs < 0:
            raise ConfigError(f"--rounds {args.rounds} / --jobs {args.jobs}: rounds at least 1, jobs 0 or more")
    except ConfigError as e:
        print(f"paired: {e}", file=sys.stderr)
        return 2
    try:
        rows = run(base, args.rounds, cases, conditions, trace, args.jobs, say=lambda line: print(line, flush=True))
    except RuntimeError as e:  # a run failed or ran past its limit: the bench stops there
        print(f"paired: {e}", file=sys.stderr)
        return 1
    if args.out:
        write_text(args.out, "".join(_line(row) + "\n" for row in rows))
    print(report(rows))
    differ = differing(rows)
    if differ:
        print(f"paired: the digests differ for {', '.join(differ)}: the trees did not run the same work, so "
              "those ratios compare different runs", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
