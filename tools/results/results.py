"""A run's result directory: summary.json, jobs/tasks/utilization/balance CSVs and a delay CDF plot.

Every file goes through ``atomic_write``, so a crash leaves old or complete files, never partial ones.
summary.json is written first marked ``incomplete`` and again without the mark once every other file
is in place: a set cut short (SIGTERM, a full disk) says so, and a complete set does not.
"""

from __future__ import annotations

import functools
import json
import math
import os
import re
import sys
from pathlib import Path

import numpy as np

from fedemu.fabric.errors import ConfigError
from fedemu.model import US_PER_S as US
from fedemu.model import Recorder
from fedemu.tools.results import metrics
from fedemu.tools.run.atomic import atomic_write, write_json

INCOMPLETE = "incomplete"  # the summary.json key of a result set whose writing was cut short
INCOMPLETE_TEXT = "the result files were being written when the run was stopped: the others may be missing " \
    "or left from an earlier run"
DELAY_FLOOR_S = 1e-6
CDF_MAX_POINTS = 4000

JOBS_HEADER = ("job_id", "arrival_s", "num_tasks", "ideal_jrt_s", "completion_s", "jrt_s", "delay_s", "short")
TASKS_HEADER = (
    "job_id", "index", "arrival_s", "start_s", "end_s", "worker", "allocation_s", "framework_queueing_s",
    "processing_s", "worker_queueing_s", "communication_s", "attempts",
)
UTILIZATION_HEADER = ("time_s", "utilization")
BALANCE_HEADER = ("time_s", "imbalance", "utilization_variance")


def summarize_run(recorder: Recorder, tables: metrics.Tables | None = None) -> dict:
    """The metric part of summary.json (delays in s, mean utilization, counts, allocation split, and the
    balance statistics, sampled over the arrival period: ``metrics.balance_stats``)."""
    tables = metrics.Tables(recorder) if tables is None else tables
    jobs, tasks = tables.jobs, tables.tasks
    delays = {k: metrics.summarize(metrics.job_delays_s(recorder, k, jobs)) for k in metrics.JOB_KINDS}
    window = tables.window
    return {
        "jobs": int(jobs["job_id"].size),
        "jobs_completed": int((jobs["completion_us"] >= 0).sum()),
        "tasks": int(tasks["job_id"].size),
        "tasks_completed": int((tasks["end_us"] >= 0).sum()),
        "unschedulable": len(recorder.unschedulable),
        "tasks_dropped": sum(len(t) for _, t in recorder.dropped),
        "jobs_with_dropped_tasks": len(recorder.dropped),
        "jobs_not_completed": _not_completed(jobs, len(recorder.unschedulable)),
        "total_units": recorder.total_units,
        "delay_s": delays["all"],
        "delay_short_s": delays["short"],
        "delay_long_s": delays["long"],
        "utilization_mean": metrics.mean_utilization(recorder, tables=tables),
        **metrics.balance_stats(recorder, tables=tables),
        "jrt_s": metrics.summarize(metrics.jrt_s(recorder, jobs)),
        "allocation_s": metrics.allocation_components(recorder, tasks),
        "window_s": None if window is None else [window[0] / US, window[1] / US],
        **({} if (gang := metrics.gang_wait_s(recorder)) is None else {"gang_wait_s": metrics.summarize(gang)}),
    }


def _not_completed(jobs: dict, rejected: int) -> dict:
    """How many submitted jobs did not complete, and why: rejected as unschedulable, or still running
    (queued or running when the run ended)."""
    missing = int((jobs["completion_us"] < 0).sum())
    return {"total": missing, "unschedulable": rejected, "still_running": missing - rejected}


def plain(obj):
    """A JSON-ready copy of ``obj``: numpy values as Python ones; inf, -inf and nan (e.g. ``fqw=inf``, strict
    priority) as the strings "inf", "-inf", "nan", which strict JSON has no numbers for."""
    if isinstance(obj, dict):
        return {str(k): plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [plain(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return plain(obj.tolist())
    if isinstance(obj, np.generic):
        return plain(obj.item())
    if isinstance(obj, float) and not math.isfinite(obj):
        return "nan" if math.isnan(obj) else ("inf" if obj > 0 else "-inf")
    if obj is None or isinstance(obj, (str, int, float, bool)):
        return obj
    raise ConfigError(f"summary.json cannot hold a value of type {type(obj).__name__} ({obj!r:.60}); a scenario's "
                      "finish must return numbers, text, lists and dicts")


def write_summary(out_dir, summary: dict) -> dict:
    """Write ``summary`` as OUT/summary.json (see ``plain``); returns it as written."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    summary = plain(summary)
    write_json(out / "summary.json", summary)
    return summary


MAX_SUMMARY_BYTES = 64 << 20  # a summary.json larger than this is not one a run wrote


def read_summary(out_dir) -> dict | None:
    try:
        with open(Path(out_dir) / "summary.json", encoding="utf-8") as f:
            summary = json.loads(f.read(MAX_SUMMARY_BYTES))
    except (OSError, ValueError):
        return None
    return summary if isinstance(summary, dict) else None


def finished(out_dir) -> dict | None:
    """The summary of a complete result set in ``out_dir`` (written whole, not marked incomplete, of a run
    that was not stopped early), else None."""
    summary = read_summary(out_dir)
    whole = summary is not None and INCOMPLETE not in summary and "partial" not in summary
    return summary if whole and "digest" in summary else None


def incomplete(out_dir) -> bool:
    """Whether ``out_dir`` holds a result set marked incomplete (its writing was cut short)."""
    return INCOMPLETE in (read_summary(out_dir) or {})


def job_columns(jobs: dict) -> dict[str, np.ndarray]:
    """jobs.csv's columns (``JOBS_HEADER``) from ``metrics.job_table``, as arrays: times in s (float), NaN where
    a job has not completed; ``short`` as bool. The one place these are computed: the CSV is written from
    them, and the Python API (``tools.api.api_result``) holds them."""
    done = jobs["completion_us"] >= 0
    arrival, completion = jobs["arrival_us"], jobs["completion_us"]
    return {
        "job_id": jobs["job_id"],
        "arrival_s": arrival / US,
        "num_tasks": jobs["num_tasks"],
        "ideal_jrt_s": jobs["ideal_jrt_us"] / US,
        "completion_s": _seconds(completion, done),
        "jrt_s": _seconds(completion - arrival, done),
        "delay_s": _seconds(completion - arrival - jobs["ideal_jrt_us"], done),
        "short": jobs["short"].astype(bool),
    }


def task_columns(tasks: dict) -> dict[str, np.ndarray]:
    """tasks.csv's columns (``TASKS_HEADER``) from ``metrics.task_table``: times in s (float), NaN for what
    has not happened; ``worker`` -1 for a task never placed."""
    started = tasks["start_us"] >= 0
    return {
        "job_id": tasks["job_id"],
        "index": tasks["index"],
        "arrival_s": tasks["arrival_us"] / US,
        "start_s": _seconds(tasks["start_us"], started),
        "end_s": _seconds(tasks["end_us"], tasks["end_us"] >= 0),
        "worker": np.where(tasks["worker"] < 0, -1, tasks["worker"]),
        "allocation_s": _seconds(tasks["start_us"] - tasks["arrival_us"], started),
        **{f"{name}_s": tasks[column] / US for name, column in metrics.ALLOCATION_PARTS},
        "attempts": tasks["attempts"],
    }


def _seconds(us: np.ndarray, present: np.ndarray) -> np.ndarray:
    """us -> float seconds; NaN where ``present`` is False."""
    return np.where(present, us / US, np.nan)


def _text(column: np.ndarray, negative_blank: bool = False, nan: str = "") -> list[str]:
    """A column as CSV cells, the text ``csv.writer`` would write for it: a float by its repr (which reads
    back exactly), NaN as ``nan`` (empty: what has not happened); a bool 0/1; with ``negative_blank`` (the
    worker: -1, never placed) a negative number empty. A column with few distinct values (most of a run's:
    its tasks share arrival times and delays) has each value formatted once; they are told apart by their
    bits, so -0.0 stays itself."""
    if column.dtype == bool:
        column = column.astype(np.int64)
    floats = column.dtype.kind == "f"
    bits = column.view(f"i{column.dtype.itemsize}") if floats else column
    distinct, where = np.unique(bits, return_inverse=True)
    if distinct.size * 4 <= column.size:
        values = (distinct.view(column.dtype) if bits is not column else distinct).tolist()
        if floats:
            cells = [nan if v != v else repr(v) for v in values]
        else:
            cells = ["" if negative_blank and v < 0 else str(v) for v in values]
        return list(map(cells.__getitem__, where.tolist()))
    if floats:
        out = list(map(repr, column.tolist()))
        missing = np.isnan(column)
    else:
        out = list(map(str, column.tolist()))
        missing = column < 0 if negative_blank else ()
    for i in np.flatnonzero(missing).tolist():
        out[i] = nan if floats else ""
    return out


CSV_CHUNK = 8192  # rows made Python objects at once (a whole table of cells would cost tens of bytes a cell)


def _write_columns(path: Path, header, cols, blank=frozenset(), nan: str = "", chunk: int = CSV_CHUNK) -> None:
    """A CSV of the columns ``cols`` (in ``header`` order), byte for byte what ``csv.writer`` writes for the
    same cells (``_text``; ``blank``: the columns whose negative numbers are empty): no cell of a number needs
    quoting, so rows are joined by commas. ``chunk``: rows at a time."""
    if not isinstance(cols, dict):
        cols = dict(zip(header, cols))
    n = len(cols[header[0]])
    with atomic_write(path, "w", newline="") as f:
        f.write(",".join(header) + "\n")
        for a in range(0, n, chunk):
            cells = [_text(cols[name][a:a + chunk], name in blank, nan) for name in header]
            f.write("\n".join(map(",".join, zip(*cells))) + "\n")


def write_jobs_csv(path, jobs: dict) -> None:
    """jobs.csv from ``metrics.job_table``; completion/jrt/delay cells are empty for unfinished jobs."""
    _write_columns(Path(path), JOBS_HEADER, job_columns(jobs))


def write_tasks_csv(path, tasks: dict) -> None:
    """tasks.csv from ``metrics.task_table``; cells of things that have not happened are empty."""
    _write_columns(Path(path), TASKS_HEADER, task_columns(tasks), {"worker"})


def write_utilization_csv(path, times_s: np.ndarray, util: np.ndarray) -> None:
    """utilization.csv: one row per bucket (start time in s, mean utilization in that bucket)."""
    _write_columns(Path(path), UTILIZATION_HEADER, (times_s, util), nan="nan")


def write_balance_csv(path, times_s: np.ndarray, imbalance: np.ndarray, variance: np.ndarray) -> None:
    """balance.csv: one row per sample (time in s, Qin's imbalance, TEBAS's utilization variance)."""
    _write_columns(Path(path), BALANCE_HEADER, (times_s, imbalance, variance), nan="nan")


def _ecdf_points(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The empirical CDF, thinned to at most CDF_MAX_POINTS points (always keeping the maximum)."""
    x, p = metrics.cdf(values)
    if x.size > CDF_MAX_POINTS:
        keep = np.unique(np.linspace(0, x.size - 1, CDF_MAX_POINTS).astype(np.int64))
        x, p = x[keep], p[keep]
    return x, p


# Each series gets its own line style, marker and width, so curves that coincide (the "all" and "short"
# delays when there are no long jobs; two schedulers with equal results) stay visible beneath each other.
LINE_STYLES = (("-", "o", 2.6), ("--", "s", 1.8), (":", "^", 1.8), ("-.", "D", 1.4), ((0, (5, 1)), "v", 1.4),
               ((0, (3, 1, 1, 1)), "P", 1.2), ((0, (1, 1)), "X", 1.2))


def cdf_curves(series: dict, log: bool, floor: float) -> tuple[list, bool]:
    """The empirical CDF of each non-empty labelled series as ``(legend text, x, p)``, and whether any value
    <= 0 was drawn at ``floor`` (``log`` only; the legend text counts them)."""
    curves, clipped = [], False
    for label, values in series.items():
        v = np.asarray(values, dtype=np.float64).reshape(-1)
        if v.size == 0:
            continue
        text = f"{label} (n={v.size}"
        if log:
            zeros = int((v <= 0).sum())
            if zeros:
                text += f", {zeros} at <= 0"
                clipped = True
            v = np.maximum(v, floor)
        curves.append((text + ")", *_ecdf_points(v)))
    return curves, clipped


def plot_cdfs(
    path, series: dict, xlabel: str, log: bool = True, *, title: str | None = None,
    floor: float = DELAY_FLOOR_S,
) -> None:
    """One figure with the empirical CDF of each labelled series (a PNG drawn by ``chart``, not matplotlib).

    With ``log`` the x axis is logarithmic and values <= 0 are drawn at ``floor``; the legend counts
    them and a note under the plot says so.
    """
    _write_png(path, cdf_chart(series, xlabel, log, title=title, floor=floor))


def cdf_chart(series: dict, xlabel: str, log: bool = True, *, title: str | None = None,
              floor: float = DELAY_FLOOR_S):
    """``plot_cdfs``'s figure as a ``chart.Chart``: a step curve per non-empty series, each in a style of its own
    (LINE_STYLES, tab10 colours), the legend lower right, "no data" when there is none."""
    from fedemu.tools.results import chart

    panel = chart.Panel(ylim=(0.0, 1.02), ylabel="CDF", legend="lower right")
    curves, clipped = cdf_curves(series, log, floor)
    for i, (text, x, p) in enumerate(curves):
        style, marker, width = LINE_STYLES[i % len(LINE_STYLES)]
        start, step = _marks(x.size, i)
        look = chart.Style(chart.TAB10[i % len(chart.TAB10)], width, chart.dash_pattern(style), marker)
        panel.step(x, p, look, text, slice(start, None, step))
    if not panel.series:
        panel.message = "no data"
    note = f"values <= 0 (e.g. a zero delay) are drawn at {floor:g} on the log axis" if clipped else ""
    return chart.Chart(7, 4.8, [panel], xlog=log and bool(panel.series), title=title or "", xlabel=xlabel, note=note)


def _write_png(path, figure) -> None:
    """A ``chart.Chart`` as a PNG file at ``path`` (a suffix other than .png is a ValueError: PNG is all it writes)."""
    if Path(path).suffix.lower() not in ("", ".png"):
        raise ValueError(f"{path}: the plots are written as PNG only (.png)")
    png = figure.png()
    with atomic_write(path, "wb") as f:
        f.write(png)


def draw_cdfs(ax, series: dict, xlabel: str, log: bool = True, *, title: str | None = None,
              floor: float = DELAY_FLOOR_S) -> bool:
    """Draw the empirical CDF of each labelled series onto the matplotlib axis ``ax`` (after the curves it
    holds already, each in a style of its own); returns whether values <= 0 were drawn at ``floor``."""
    drawn = len(ax.get_lines())  # the curves an earlier call drew: the styles go on from there
    curves, clipped = cdf_curves(series, log, floor)
    for plotted, (text, x, p) in enumerate(curves):
        style, marker, width = LINE_STYLES[(drawn + plotted) % len(LINE_STYLES)]
        ax.step(x, p, where="post", label=text, linestyle=style, linewidth=width, marker=marker,
                markevery=_marks(x.size, drawn + plotted), markersize=5, markerfacecolor="none",
                zorder=2 + drawn + plotted)
    plotted = len(curves)
    if log and plotted:
        ax.set_xscale("log")
        ax.xaxis.set_major_formatter(_plain_powers()(10))
        ax.xaxis.set_minor_formatter(_plain_powers()(10))
    ax.set_xlabel(xlabel)
    ax.set_ylabel("CDF")
    ax.set_ylim(0.0, 1.02)
    ax.grid(True, which="major", alpha=0.4)
    if title:
        ax.set_title(title)
    if plotted or drawn:
        ax.legend(loc="lower right")
    else:
        ax.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes)
    return clipped


_POWER = re.compile(r"\$\\mathdefault\{(?:([0-9.]+)\\times)?(-?)([0-9]+)\^\{(-?[0-9]+)\}\}\$")


def plain_power(label: str) -> str:
    """A log-axis tick label as matplotlib writes it in mathtext (``$\\mathdefault{2\\times10^{-3}}$``) as plain
    text with superscripts (``2×10⁻³``); any other label as it is."""
    from fedemu.tools.results.chart import SUPERSCRIPT

    m = _POWER.fullmatch(label)
    if m is None:
        return label
    coeff, sign, base, exp = m.groups()
    return f"{sign}{coeff + '×' if coeff else ''}{base}{exp.translate(SUPERSCRIPT)}"


@functools.cache
def _plain_powers():
    """matplotlib's log-axis tick formatter (the same ticks labelled) writing ``plain_power`` text: mathtext's
    parser is built on first use and lays out every label (docs/performance.md, What a run's results cost)."""
    from matplotlib.ticker import LogFormatterSciNotation

    class PlainPowers(LogFormatterSciNotation):
        def __call__(self, x, pos=None):
            return plain_power(super().__call__(x, pos))

    return PlainPowers


def plot_balance(path, times_s: np.ndarray, imbalance: np.ndarray, variance: np.ndarray, *,
                 title: str | None = None) -> None:
    """imbalance.png: Qin's imbalance Im(t) over time (max minus mean machine load, eq. 1) with its mean,
    and TEBAS's utilization variance below it (eqs. 10-12), one point per balance.csv sample."""
    _write_png(path, balance_chart(times_s, imbalance, variance, title=title))


def balance_chart(times_s: np.ndarray, imbalance: np.ndarray, variance: np.ndarray, *, title: str | None = None):
    """``plot_balance``'s figure as a ``chart.Chart``: two panels sharing the time axis, each series with a
    dashed line at its mean and the legend upper right, "no data" in a panel with none."""
    from fedemu.tools.results import chart

    panels = [chart.Panel(height=3), chart.Panel(height=2)]
    for panel, values, label in zip(panels, (imbalance, variance), ("imbalance Im(t)", "utilization variance")):
        if values.size:
            mean = float(values.mean())
            panel.line(times_s, values, chart.Style(chart.TAB10[0], 1.2), label)
            panel.hline(mean, chart.Style("#666666", 1.0, chart.dash_pattern("--")), f"mean {mean:.4g}")
            panel.legend, panel.legend_pt = "upper right", 8
        else:
            panel.message = "no data"
        panel.ylabel = label
    return chart.Chart(7, 5.2, panels, title=title or "", xlabel="virtual time (s)")


def agg_figure(**kwargs):
    """A matplotlib Figure on an Agg canvas: the one backend fedemu draws with (no pyplot, no window).
    ``MPLBACKEND`` names pyplot's backend, and a name matplotlib does not know makes its very import fail
    (``MPLBACKEND=nonsense``): it is set aside for that import, since these figures never use it."""
    if "matplotlib" not in sys.modules:
        backend = os.environ.pop("MPLBACKEND", None)
        try:
            import matplotlib  # noqa: F401
        finally:
            if backend is not None:
                os.environ["MPLBACKEND"] = backend
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(**kwargs)
    FigureCanvasAgg(fig)
    return fig


def _marks(points: int, series: int) -> tuple[int, int]:
    """``markevery`` of a curve: 8 markers, shifted per series so coinciding curves show every marker."""
    step = max(1, points // 8)
    return (step * (series % 4) // 4, step)


def run_title(summary: dict) -> str:
    """The per-run plot title: scheduler (and policy), scenario and seed, as far as the summary says."""
    who = summary.get("scheduler") or ""
    if who and summary.get("policy"):
        who += f"/{summary['policy']}"
    scenario = str(summary.get("scenario") or "").removeprefix("scenarios.")
    where = ", ".join(str(x) for x in (who, scenario,
                                       f"seed {summary['seed']}" if "seed" in summary else None) if x)
    return f"Job delay: {where}" if where else "Job delay"


def plot_shares(path, recorder: Recorder, fairness: dict, total: tuple, end_us: int, title: str) -> None:
    """share_over_time.png: each user's measured share of the datacenter over time (solid) against its
    configured share (dashed, same colour), with the contended time shaded."""
    from fedemu.policies.fair_measure import share_series

    users = fairness["users"]
    times, shares, contended, _ = share_series(recorder, len(users), total, end_us)
    fig = agg_figure(figsize=(7, 4.8))
    ax = fig.add_subplot()
    x = times / US
    for u, row in enumerate(users):
        line = ax.step(x, shares[u], where="post", linewidth=1.2,
                       label=f"user {u} (target {row['share']:.0%}, measured {row['measured']:.1%})")[0]
        ax.axhline(row["share"], color=line.get_color(), linestyle="--", linewidth=1)
    if contended.any():
        ax.fill_between(x, 0, 1, where=contended, step="post", color="0.85", alpha=0.5, label="contended",
                        transform=ax.get_xaxis_transform())
    ax.set_xlabel("virtual time (s)")
    ax.set_ylabel("share of the datacenter")
    ax.set_ylim(0, 1)
    ax.grid(True, alpha=0.4)
    ax.set_title(title)
    ax.legend(loc="upper right", fontsize=8)
    fig.tight_layout()
    with atomic_write(path, "wb") as f:
        fig.savefig(f, format="png", dpi=110, metadata={"Software": None})


def write_results(
    out_dir, *, recorder: Recorder, summary_extra: dict, record_csv: bool = True, plot: bool = True,
    bucket_us: int = US,
) -> dict:
    """Write summary.json (extra fields, then metrics), the CSVs (``record_csv``), delay_cdf.png and imbalance.png.

    Returns the summary as written (plain JSON types); an extra key clashing with a metric is a ValueError.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tables = metrics.Tables(recorder)
    jobs, tasks = tables.jobs, tables.tasks
    balance = metrics.balance_series(recorder, bucket_us, tables=tables) if record_csv or plot else None  # once: costly
    measured = summarize_run(recorder, tables)
    clash = sorted(set(summary_extra) & set(measured))
    if clash:
        raise ValueError(f"summary_extra keys {clash} clash with metric keys; rename them")
    summary = write_summary(out, {**summary_extra, **measured, INCOMPLETE: INCOMPLETE_TEXT})
    del summary[INCOMPLETE]
    if record_csv:
        write_jobs_csv(out / "jobs.csv", jobs)
        write_tasks_csv(out / "tasks.csv", tasks)
        series = metrics.utilization_series(recorder, bucket_us, tables=tables)
        write_utilization_csv(out / "utilization.csv", *series)
        write_balance_csv(out / "balance.csv", *balance)
    del tables, tasks  # the task columns are let go before the plots' libraries load (a run's peak memory)
    if plot:
        delays = {k: metrics.job_delays_s(recorder, k, jobs) for k in metrics.JOB_KINDS}
        plot_cdfs(out / "delay_cdf.png", delays, "delay in job response time (s)", log=True,
                  title=run_title(summary))
        if summary.get("fairness"):
            end_us = int(round(float(summary.get("virtual_end_s", 0)) * US))
            total = tuple(summary["fairness"]["total"])
            plot_shares(out / "share_over_time.png", recorder, summary["fairness"], total, end_us,
                        run_title(summary).replace("Job delay", "Shares"))
        plot_balance(out / "imbalance.png", *balance, title=run_title(summary).replace("Job delay", "Balance", 1))
    write_json(out / "summary.json", summary)  # the set is complete: the mark goes
    return summary
