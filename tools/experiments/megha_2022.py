"""megha-2022's experiments (file 002, section VI): Megha against Sparrow and a centralized scheduler, GMs x LMs, fairness."""

from __future__ import annotations

from .base import SCENARIOS, Experiment, shape, trace

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
    goog = {"workload": "trace", "trace": trace("GOOG_subtrace.tr"), "jobs": jobs}
    yh = 300 if quick else 0
    out = [Experiment("vs-sparrow", "Megha vs Sparrow, 10,000 workers, YH1_sub.tr" + (f" first {yh} jobs" if yh else "")
                      + ", no constraints", {**shape(10_000, 10, 10), "workload": "trace",
                                             "trace": trace("YH1_sub.tr"), "jobs": yh, "constraints": False,
                                             "cost_model": COSTS_2022},
                      "megha,sparrow", plots=("allocation",),
                      note="the paper used a Cloudera sample we do not have; YH1_sub stands in. Sparrow's "
                           "schedulers take no processing time, as in the paper's Sparrow simulator (V-B)")]
    for size in (10_000, 20_000):
        load = {} if size == 10_000 else {"arrival_scale": 10_000 / size}
        out.append(Experiment(f"central-{size // 1000}k", f"centralized vs Megha (10 GMs x 10 LMs), {size:,} "
                              f"workers, GOOG_subtrace.tr first {jobs} jobs" +
                              (f", arrivals {size // 10_000}x as fast (the same load per worker)" if load else ""),
                              {**shape(size, 10, 10), **goog, **load}, "megha,centralized", group="central",
                              plots=("allocation",),
                              note="the paper used its constraint-augmented alibaba sample; the Google sub-trace "
                                   "with the stand-in constraints stands in; the load per worker is the same at "
                                   "both sizes (the paper compares datacenter sizes, not loads)"))
    workers = 30_000
    for g, l in ((5, 5), (5, 20), (10, 10), (20, 10), (20, 20)):
        out.append(Experiment(f"gl-{g}x{l}", f"{g} GMs x {l} LMs, {workers:,} workers, GOOG_subtrace.tr first {jobs} jobs",
                              {**shape(workers, g, l), **goog}, "megha", group="gms-lms"))
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
