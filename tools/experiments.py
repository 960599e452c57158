"""What `fedemu reproduce` runs for each paper: experiments (one scenario configuration, the schedulers
and policies compared on it), at paper scale or scaled down (``--quick``).

Every experiment runs the ``default`` scenario with explicit overrides, so any run of a report can be
repeated by hand with ``fedemu run default --set ...``. Each paper's experiments use the set-up its own
simulator had (named below, with the source); where the papers are silent or our inputs differ, the
choice is written beside the experiment (``note``) and printed in the report. A sensitivity case is a
copy of some experiments with one thing changed (``variant``, named ``NAME-VARIANT``); the report sets
each claim's verdict on it beside the main one.
"""

from __future__ import annotations

import math
from pathlib import Path

import attrs

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
TRACES = DATA / "meghanat_megha_simulator" / "traces" / "input"
EC2_TRACES = DATA / "r5by_pigeon" / "deploy" / "ec2" / "template" / "new_trace" / "pigeon_trace"
SCENARIOS = Path(__file__).resolve().parents[1] / "scenarios"

VARIANTS = {
    "cs-paper": "The same experiments with PigeonC's constraint-set counts as the paper's section 4.2 describes them "
                "(`cs_counts=paper`: each machine set with its frequency) in place of the authors' simulator's "
                "(`cs_counts=subset-merge`; docs/reproductions/pigeonc.md); Megha's runs are the same runs.",
    "standin": "The same experiments with the stand-in constraint table (`constraint_table=standin`, "
               "scenarios/constraint_table.json: invented before the authors' inputs were known, three machine "
               "profiles cycled over the clusters) in place of the authors' table; everything else as above.",
}


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
    variant: str = ""  # a sensitivity case of the experiment named without the suffix (VARIANTS)
    plots: tuple = ()  # extra plots: "allocation" (allocation-time CDF and parts)


def _shape(workers: int, gms: int, lms: int) -> dict:
    return {"gms": gms, "lms": lms, "workers_per_partition": workers // (gms * lms)}


def _trace(name: str) -> str:
    return str(TRACES / name)


def variant(e: Experiment, name: str, **overrides) -> Experiment:
    """``e`` as the sensitivity case ``name``, with ``overrides`` changed."""
    return attrs.evolve(e, name=f"{e.name}-{name}", overrides={**e.overrides, **overrides}, variant=name,
                        group=f"sensitivity-{name}", note=(e.note + "; " if e.note else "") + VARIANTS[name])


# ---- megha-2023 (file 000, sections 2.3, 5-7) ----------------------------------------------------
# The authors' simulator (meghanat/megha-constraint-aware at b503dbc; figures in
# shared/papers/megha-2023-setup.md): its constraint tables, a task no machine can run dropped, no
# processing time, 0.5 ms links, LM heartbeat 5 s, PigeonC's 10 distributors with FQW 20 and a 2 s
# short/long cutoff (every syn job is short), no reserved workers (PigeonC has none). The repository's one
# configuration is the syn_N one; for the traces the short/long cutoffs are those of the Pigeon and Eagle
# simulators (Pigeon 2019, 4.1: 90.5811 s for Yahoo, 1129.532 s for Google). PigeonC's distributors weigh the
# masters by the constraint-set counts as that simulator builds them (cs_counts=subset-merge,
# policies/constraint_sets.py); the paper's own description of them is a sensitivity case.
CUTOFF = {"yahoo": 90.5811, "google": 1129.532}
AUTHORS_2023 = {"constraint_table": "megha-2023", "infeasible": "drop-task", "cost_model": "zero", "heartbeat_s": 5,
                "latency_ms": 0.5, "short_cutoff_s": 2, "distributors": 10, "fqw": 20, "cs_counts": "subset-merge"}


def _dc_2023(workers: int) -> dict:
    """Megha 5 GMs x 5 LMs over ``workers``; PigeonC's masters of 100 workers over the same machine list."""
    return {**_shape(workers, 5, 5), "masters": workers // 100}


def megha_2023(quick: bool) -> list[Experiment]:
    """Megha vs PigeonC x Random/Min-Constraints on syn_250/500/1000, Yahoo and Google on the authors'
    set-up; the same without constraints against Sparrow and Pigeon (section 2.2); the stand-in table as
    a sensitivity case."""
    both = dict(schedulers="megha,pigeonc", policies="random,min-constraints")
    # quick: a tenth of the workers and of the syn_N rate (the same load per worker; PigeonC keeps groups of
    # 100), a tenth of the jobs of syn_N; the traces keep the paper's datacenter (their load is fixed by their
    # arrival times) and run their first jobs only
    small = _dc_2023(1_000 if quick else 10_000)
    syn_jobs = 200 if quick else 2000
    scale = 10 if quick else 1
    out = []
    for n in (250, 500, 1000):
        out.append(Experiment(f"syn_{n}", f"syn_{n}: {syn_jobs} jobs of {n // scale} 1-s tasks, one a second, on "
                              f"{small['gms'] * small['lms'] * small['workers_per_partition']:,} workers",
                              {**AUTHORS_2023, **small, "workload": f"syn_{n // scale}", "jobs": syn_jobs}, **both))
    yh_jobs = 300 if quick else 0
    goog_jobs = 500 if quick else 0
    yahoo = {**AUTHORS_2023, **_dc_2023(10_000), "workload": "trace", "trace": _trace("YH1_sub.tr"), "jobs": yh_jobs,
             "short_cutoff_s": CUTOFF["yahoo"]}
    google = {**AUTHORS_2023, **_dc_2023(20_000), "workload": "trace", "trace": _trace("GOOG_subtrace.tr"),
              "jobs": goog_jobs, "short_cutoff_s": CUTOFF["google"]}
    yh_note = ("YH1_sub.tr is a sub-trace (2,910 jobs, 122,878 tasks) of the Yahoo trace the paper ran (24,262 "
               "jobs, 968,335 tasks)")
    out.append(Experiment("yahoo", "Yahoo: YH1_sub.tr" + (f", first {yh_jobs} jobs" if yh_jobs else " (2,910 jobs)")
                          + ", 10,000 workers", yahoo, **both, note=yh_note))
    out.append(Experiment("google", "Google: GOOG_subtrace.tr" + (f", first {goog_jobs} jobs" if goog_jobs else
                                                                   " (10,000 jobs)") + ", 20,000 workers",
                          google, **both,
                          note="the paper's Google sub-trace itself; 20,000 workers as the paper's section 5 says "
                               "(Megha 5 x 5 x 800, PigeonC 200 masters of 100: the authors' repository holds only "
                               "the 10,000-worker configuration)"))
    free = {"constraints": False, "infeasible": "reject-job"}
    unconstrained = lambda o: {k: v for k, v in {**o, **free}.items() if k != "cs_counts"}  # noqa: E731
    out.append(Experiment("yahoo-free", "Yahoo without constraints: Megha, Sparrow and Pigeon (section 2.2)",
                          unconstrained(yahoo), "megha,sparrow,pigeon", group="no-constraints",
                          note=yh_note + "; the earlier comparison (section 2.2, [15]) is not described further, "
                               "so the authors' 2023 set-up is kept, constraints off; Pigeon with 100 masters, "
                               "2% reserved workers, W = 20"))
    out.append(Experiment("google-free", "Google without constraints: Megha, Sparrow and Pigeon (section 2.2)",
                          unconstrained(google), "megha,sparrow,pigeon", group="no-constraints",
                          note="as yahoo-free"))
    for e in out[:4]:
        out.append(variant(e, "cs-paper", cs_counts="paper"))
    for e in out[:3]:
        out.append(variant(e, "standin", constraint_table="standin"))
    return out


# ---- megha-2022 (file 002, section VI) -----------------------------------------------------------
# The workshop paper's simulator: Megha with its prototype's processing (V-B, a single-node deployment of the
# HTTP and RabbitMQ prototype; our prototype cost model), heartbeat 10 s; the Sparrow simulator "does not
# consider any overheads other than a constant network delay" (V-B): scenarios/costs_megha_2022.json gives
# the GMs and LMs the prototype's costs and Sparrow's schedulers none.
COSTS_2022 = str(SCENARIOS / "costs_megha_2022.json")


def megha_2022(quick: bool) -> list[Experiment]:
    """Megha vs Sparrow allocation time; centralized vs Megha at two sizes at the same load; GMs x LMs;
    fairness at three sizes with intermittent overload."""
    # quick: the paper's datacenter sizes (allocation time depends on them), the first 300 jobs only
    jobs = 300 if quick else 2000
    goog = {"workload": "trace", "trace": _trace("GOOG_subtrace.tr"), "jobs": jobs}
    yh = 300 if quick else 0
    out = [Experiment("vs-sparrow", "Megha vs Sparrow, 10,000 workers, YH1_sub.tr" + (f" first {yh} jobs" if yh else "")
                      + ", no constraints", {**_shape(10_000, 10, 10), "workload": "trace",
                                             "trace": _trace("YH1_sub.tr"), "jobs": yh, "constraints": False,
                                             "cost_model": COSTS_2022},
                      "megha,sparrow", plots=("allocation",),
                      note="the paper used a Cloudera sample we do not have; YH1_sub stands in. Sparrow's "
                           "schedulers take no processing time, as in the paper's Sparrow simulator (V-B)")]
    for size in (10_000, 20_000):
        load = {} if size == 10_000 else {"arrival_scale": 10_000 / size}
        out.append(Experiment(f"central-{size // 1000}k", f"centralized vs Megha (10 GMs x 10 LMs), {size:,} "
                              f"workers, GOOG_subtrace.tr first {jobs} jobs" +
                              (f", arrivals {size // 10_000}x as fast (the same load per worker)" if load else ""),
                              {**_shape(size, 10, 10), **goog, **load}, "megha,centralized", group="central",
                              plots=("allocation",),
                              note="the paper used its constraint-augmented alibaba sample; the Google sub-trace "
                                   "with the stand-in constraints stands in; the load per worker is the same at "
                                   "both sizes (the paper compares datacenter sizes, not loads)"))
    workers = 30_000
    for g, l in ((5, 5), (5, 20), (10, 10), (20, 10), (20, 20)):
        out.append(Experiment(f"gl-{g}x{l}", f"{g} GMs x {l} LMs, {workers:,} workers, GOOG_subtrace.tr first {jobs} jobs",
                              {**_shape(workers, g, l), **goog}, "megha", group="gms-lms"))
    # fairness (VI-E, Figs. 10-11): "smaller data center sizes to encourage resource contention". The same
    # jobs on every size, Poisson arrivals at a mean offered load of 0.9 on the smallest: bursts above its
    # capacity come and go (intermittent overload, not a standing backlog), the largest is lightly loaded.
    # (The first GOOG_subtrace jobs arrive in one burst of hundreds of jobs: a backlog of days at every size.)
    fair_jobs = 400 if quick else 1500
    rate = round(0.9 * 198 / (10 * 10.0), 4)
    users = {"gms": 3, "lms": 2, "users": 4, "shares": "10,25,15,50", "constraints": False, "workload": "poisson",
             "rate": rate, "fanout": 10, "task_s": 10.0, "task_dist": "exp", "jobs": fair_jobs}
    for size in (198, 498, 1500):
        out.append(Experiment(f"fair-{round(size, -2)}", f"fairness: 4 users 10/25/15/50 on 3 GMs x 2 LMs, {size:,} "
                              f"workers, {fair_jobs} Poisson jobs of 10 tasks (exponential, mean 10 s), {rate:g} jobs "
                              "a second, constraints off", {**users, "workers": size}, "megha", group="fairness",
                              note="the fairness scenario's users and GMs (`fedemu run fairness`); the paper's google_19 "
                                   "sample is not available, and the first GOOG_subtrace jobs arrive in one burst that "
                                   "leaves a backlog of days on every size, so Poisson jobs offering a mean load of 0.9 "
                                   "on 198 workers (0.36 on 498, 0.12 on 1,500) stand in; 198 and 498 workers "
                                   "(multiples of 6) stand in for 200 and 500"))
    return out


# ---- pigeon-2019 (file 001, sections 3, 4 and 5) ---------------------------------------------------
# The Pigeon simulator: no processing time (section 5: "without knowing the exact processing overhead ...
# we have not taken this overhead into account"), 0.5 ms links, no constraints.
EXAMPLE_TRACE = Path(__file__).with_name("claims") / "pigeon-example.tr"  # section 4.1: jobs A, B, C at time 0
ZERO = {"cost_model": "zero", "constraints": False}


def _model(workers: int, group: int, load: float, jobs: int) -> dict:
    """Section 3's simulation (Figs. 3-4): F = 100 tasks of exponential time, mean 100 ms, Poisson jobs at
    ``load``; one class of jobs (one queue: no reserved workers)."""
    return {**ZERO, "gms": 1, "lms": workers // group, "workers_per_partition": group, "workload": "poisson",
            "load": load, "fanout": 100, "task_s": 0.1, "task_dist": "exp", "jobs": jobs, "reserved_fraction": 0}


def pigeon_2019(quick: bool) -> list[Experiment]:
    """The worked example; section 3's model runs (group sizes and loads, against Sparrow); Yahoo against
    Pigeon with one group, Sparrow and W; section 5's EC2 set-up on the NGO traces."""
    out = [Experiment("example", "section 4.1: 4 workers in 2 groups of 2; job A (20,1,1,10,10,10), B (2), C (2) at 0",
                      {**ZERO, "gms": 1, "lms": 2, "workers_per_partition": 2, "workload": "trace",
                       "trace": str(EXAMPLE_TRACE), "latency_ms": 0, "distributors": 1, "reserved_fraction": 0},
                      "pigeon,centralized", group="example", seeds="1,2,3,4,5,6,7,8",
                      note="no communication time and no reserved workers, as in the example; eight seeds, "
                           "whatever --seeds says: Pigeon sends each one-task job to a random master (as the "
                           "real Pigeon, which shuffles the masters per job), so its sum is one of 30, 36 and 46")]
    # paper: Nc = 30,000 as in the paper, 10,000 jobs; quick: 10,000 workers, 1,000 jobs at 90% load and 500
    # at the lower loads (where few jobs queue), and no other group size (groups of 50 cost twice as much; 50
    # groups of 200 would be fewer than F = 100, which the model assumes they are not)
    nc = 10_000 if quick else 30_000
    runs = ((100, 0.9, 1_000), (100, 0.8, 500), (100, 0.7, 500)) if quick else \
        tuple((g, x, 10_000) for g, x in ((100, 0.9), (100, 0.8), (100, 0.7), (50, 0.9), (200, 0.9)))
    for group, load, jobs in runs:
        out.append(Experiment(f"model-{group}-{int(load * 100)}", f"section 3's simulation: {nc:,} workers in groups "
                              f"of {group}, F = 100 tasks of exponential time (mean 100 ms), load {load:.0%}, "
                              f"{jobs:,} jobs", _model(nc, group, load, jobs), "pigeon", group="model",
                              note="" if nc == 30_000 else f"{nc:,} workers in place of the paper's 30,000"))
    jobs = runs[-1][2] if quick else 10_000
    out.append(Experiment("model-sparrow-50", f"Sparrow, {nc:,} workers, F = 100, load 50%, {jobs:,} jobs (Fig. 2)",
                          {k: v for k, v in _model(nc, 100, 0.5, jobs).items() if k != "reserved_fraction"},
                          "sparrow", group="model",
                          note="Fig. 2 is the paper's analysis (Eq. 4: 2F probes per job); this is its simulation"))
    yh = 300 if quick else 0
    yahoo = {**ZERO, "gms": 1, "lms": 30, "workers_per_partition": 100, "workload": "trace",
             "trace": _trace("YH1_sub.tr"), "jobs": yh}
    what = "YH1_sub.tr" + (f" first {yh} jobs" if yh else "") + ", 3,000 workers"
    yh_note = "YH1_sub is a sub-trace of the Yahoo trace: at 3,000 workers its load is not the paper's"
    out.append(Experiment("yahoo-3k", f"{what} in 30 groups of 100, short/long cutoff 90.5811 s",
                          yahoo, "pigeon,sparrow", group="traces", note=yh_note))
    out.append(Experiment("yahoo-3k-onegroup", f"{what} in one group: Pigeon's centralized counterpart (4.1)",
                          {**yahoo, "masters": 1}, "pigeon", group="traces",
                          note=yh_note + "; one master over every worker, with the same two fair queues, W = 20 and "
                                         "2% reserved workers"))
    for w in (5, 10, math.inf):
        out.append(Experiment(f"yahoo-3k-w{w}", f"{what}, W = {w}", {**yahoo, "fqw": w}, "pigeon", group="weight",
                              note=yh_note + "; section 4.1 varies W (W = 20 is yahoo-3k)"))
    ec2 = {**ZERO, "gms": 1, "lms": 3, "workers_per_partition": 40, "distributors": 10, "reserved_fraction": 0.1,
           "fqw": math.inf, "short_cutoff_s": 1, "workload": "trace"}
    for load in (50, 60, 70, 80, 90):  # the whole traces at --quick too: 10,291 tasks each
        out.append(Experiment(f"ec2-{load}", f"section 5's EC2 set-up: 120 workers in 3 groups of 40, NGO_trace{load} "
                              "(5,001 Google-derived jobs)", {**ec2, "trace": str(EC2_TRACES / f"NGO_trace{load}")},
                              "pigeon,sparrow", group="ec2",
                              note="10 schedulers (distributors), 10% reserved workers, W = inf, short/long cutoff 1 s "
                                   "as on EC2; the masters are actors of their own here (a worker there); the "
                                   "simulation's settings (no processing time)"))
    return out


PAPERS = {
    "megha-2023": ("Constraint-Aware Federated Scheduling for Data Center Workloads (IoT 2023), file 000", megha_2023),
    "megha-2022": ("Megha: Decentralized Global Fair Scheduling for Federated Clusters (workshop paper), file 002",
                   megha_2022),
    "pigeon-2019": ("Pigeon: an Effective Distributed, Hierarchical Datacenter Job Scheduler (SoCC 2019), file 001",
                    pigeon_2019),
}
