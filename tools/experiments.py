"""What `fedemu reproduce` runs for each paper: experiments (one scenario configuration, the schedulers
and policies compared on it), at paper scale or scaled down (``--quick``).

Every experiment runs the ``default`` scenario with explicit overrides, so any run of a report can be
repeated by hand with ``fedemu run default --set ...``. Choices where the papers are silent or where our
inputs differ are written beside each experiment (``note``) and printed in the report.
"""

from __future__ import annotations

from pathlib import Path

import attrs

TRACES = Path(__file__).resolve().parents[2] / "shared" / "data" / "meghanat_megha_simulator" / "traces" / "input"
SCARCITY_LEVELS = (0.25, 0.5, 1.0, 1.5, 2.0)


@attrs.frozen
class Experiment:
    """One configuration and what is compared on it; ``group`` gathers experiments into a report section."""

    name: str
    title: str
    overrides: dict
    schedulers: str
    policies: str = "random"
    group: str = "main"
    note: str = ""
    seeds: str = ""  # its own seeds (a worked example costs nothing: more seeds show every draw); empty: --seeds


def _shape(workers: int, gms: int, lms: int) -> dict:
    return {"gms": gms, "lms": lms, "workers_per_partition": workers // (gms * lms)}


def _trace(name: str) -> str:
    return str(TRACES / name)


# ---- megha-2023 (file 000, sections 5-6) -------------------------------------------------------
def megha_2023(quick: bool) -> list[Experiment]:
    """Megha vs PigeonC x Random/Min-Constraints on syn_250/500/1000, Yahoo and Google, and the scarcity sweep."""
    both = dict(schedulers="megha,pigeonc", policies="random,min-constraints")
    # quick: a tenth of the workers and of the syn_N rate (the same load per worker), a tenth of the jobs
    # of syn_N; the traces keep the paper's datacenter (their load is fixed by their arrival times) and
    # run their first jobs only
    small = _shape(1_000, 10, 10) if quick else _shape(10_000, 10, 10)
    syn_jobs = 200 if quick else 2000
    scale = 10 if quick else 1
    out = []
    for n in (250, 500, 1000):
        out.append(Experiment(f"syn_{n}", f"syn_{n}: {syn_jobs} jobs of {n // scale} 1-s tasks, one a second, on "
                              f"{small['gms'] * small['lms'] * small['workers_per_partition']:,} workers",
                              {**small, "workload": f"syn_{n // scale}", "jobs": syn_jobs}, **both))
    yh_jobs = 300 if quick else 0
    goog_jobs = 500 if quick else 0
    out.append(Experiment("yahoo", "Yahoo: YH1_sub.tr" + (f", first {yh_jobs} jobs" if yh_jobs else " (2,910 jobs)")
                          + ", 10,000 workers", {**_shape(10_000, 10, 10), "workload": "trace",
                                                 "trace": _trace("YH1_sub.tr"), "jobs": yh_jobs}, **both,
                          note="YH1_sub.tr is a sub-trace (2,910 jobs, 122,878 tasks) of the Yahoo trace the paper "
                               "ran (24,262 jobs, 968,335 tasks)"))
    out.append(Experiment("google", "Google: GOOG_subtrace.tr" + (f", first {goog_jobs} jobs" if goog_jobs else
                                                                   " (10,000 jobs)") + ", 20,000 workers",
                          {**_shape(20_000, 10, 20), "workload": "trace", "trace": _trace("GOOG_subtrace.tr"),
                           "jobs": goog_jobs}, **both, note="the paper's Google sub-trace itself"))
    sweep = {**small, "workload": f"syn_{1000 // scale}", "jobs": syn_jobs}
    for s in SCARCITY_LEVELS:
        out.append(Experiment(f"scarcity-{s:g}", f"syn_1000 analogue ({sweep['workload']}), constraint_scarcity={s:g}",
                              {**sweep, "constraint_scarcity": s}, "megha,pigeonc", "random", group="scarcity"))
    return out


# ---- megha-2022 (file 002, section VI) -----------------------------------------------------------
def megha_2022(quick: bool) -> list[Experiment]:
    """Megha vs Sparrow allocation time; centralized vs Megha at two sizes; GMs x LMs; fairness at three sizes."""
    # quick: the paper's datacenter sizes (allocation time depends on them), the first 300 jobs only
    jobs = 300 if quick else 2000
    goog = {"workload": "trace", "trace": _trace("GOOG_subtrace.tr"), "jobs": jobs}
    yh = 300 if quick else 0
    out = [Experiment("vs-sparrow", "Megha vs Sparrow, 10,000 workers, YH1_sub.tr" + (f" first {yh} jobs" if yh else "")
                      + ", no constraints", {**_shape(10_000, 10, 10), "workload": "trace",
                                             "trace": _trace("YH1_sub.tr"), "jobs": yh, "constraints": False},
                      "megha,sparrow", note="the paper used a Cloudera sample we do not have; YH1_sub stands in")]
    for size in (10_000, 20_000):
        out.append(Experiment(f"central-{size // 1000}k", f"centralized vs Megha (10 GMs x 10 LMs), {size:,} "
                              f"workers, GOOG_subtrace.tr first {jobs} jobs", {**_shape(size, 10, 10), **goog},
                              "megha,centralized", group="central",
                              note="the paper used its constraint-augmented alibaba sample; the Google sub-trace "
                                   "with the stand-in constraints stands in"))
    workers = 30_000
    for g, l in ((5, 5), (5, 20), (10, 10), (20, 10), (20, 20)):
        out.append(Experiment(f"gl-{g}x{l}", f"{g} GMs x {l} LMs, {workers:,} workers, GOOG_subtrace.tr first {jobs} jobs",
                              {**_shape(workers, g, l), **goog}, "megha", group="gms-lms"))
    # fairness (VI-E, Figs. 10-11): the fairness scenario's set-up in the default scenario's keys
    users = {"gms": 3, "lms": 2, "users": 4, "shares": "10,25,15,50", "constraints": False, "workload": "trace",
             "trace": _trace("GOOG_subtrace.tr"), "jobs": 150}
    for size in (198, 498, 1500):
        out.append(Experiment(f"fair-{round(size, -2)}", f"fairness: 4 users 10/25/15/50 on 3 GMs x 2 LMs, {size:,} "
                              "workers, GOOG_subtrace.tr first 150 jobs, constraints off", {**users, "workers": size},
                              "megha", group="fairness",
                              note="as `fedemu run fairness`; 198 and 498 workers (multiples of 6) stand in for 200 "
                                   "and 500; the paper's Google-derived workload is not available"))
    return out


# ---- pigeon-2019 (file 001, sections 3 and 4) -----------------------------------------------------
EXAMPLE_TRACE = Path(__file__).with_name("claims") / "pigeon-example.tr"  # section 4.1: jobs A, B, C at time 0


def pigeon_2019(quick: bool) -> list[Experiment]:
    """The section 4.1 worked example; Pigeon vs Sparrow vs centralized (Poisson at 80%/90%, Yahoo at 3K)."""
    zero = {"cost_model": "zero", "constraints": False}  # Pigeon's simulations ignore processing; no constraints
    out = [Experiment("example", "section 4.1: 4 workers in 2 groups of 2; job A (20,1,1,10,10,10), B (2), C (2) at 0",
                      {**zero, "gms": 1, "lms": 2, "workers_per_partition": 2, "workload": "trace",
                       "trace": str(EXAMPLE_TRACE), "latency_ms": 0, "distributors": 1, "reserved_fraction": 0},
                      "pigeon,centralized", group="example", seeds="1,2,3,4,5,6,7,8",
                      note="no communication time and no reserved workers, as in the example; eight seeds, "
                           "whatever --seeds says, since a seed decides where Pigeon sends the one-task jobs")]
    jobs = 2000 if quick else 20_000
    for load in (0.8, 0.9):
        out.append(Experiment(f"poisson-{int(load * 100)}", f"Poisson jobs of 10 equal 1-s tasks at load {load:.0%}, "
                              f"1,000 workers in 10 groups of 100, {jobs:,} jobs",
                              {**zero, "gms": 1, "lms": 10, "workers_per_partition": 100, "workload": "poisson",
                               "load": load, "fanout": 10, "task_dist": "const", "jobs": jobs},
                              "pigeon,sparrow,centralized", group="model",
                              note="section 3's model: group size 100, tasks of one job equally long"))
    yh = 500 if quick else 0
    out.append(Experiment("yahoo-3k", "YH1_sub.tr" + (f" first {yh} jobs" if yh else "") + ", 3,000 workers in 30 "
                          "groups of 100, short/long cutoff 90.5811 s",
                          {**zero, "gms": 1, "lms": 30, "workers_per_partition": 100, "workload": "trace",
                           "trace": _trace("YH1_sub.tr"), "jobs": yh},
                          "pigeon,sparrow,centralized", group="traces",
                          note="YH1_sub is a sub-trace of the Yahoo trace: at 3,000 workers its load is not the "
                               "paper's"))
    return out


PAPERS = {
    "megha-2023": ("Constraint-Aware Federated Scheduling for Data Center Workloads (IoT 2023), file 000", megha_2023),
    "megha-2022": ("Megha: Decentralized Global Fair Scheduling for Federated Clusters (workshop paper), file 002",
                   megha_2022),
    "pigeon-2019": ("Pigeon: an Effective Distributed, Hierarchical Datacenter Job Scheduler (SoCC 2019), file 001",
                    pigeon_2019),
}
