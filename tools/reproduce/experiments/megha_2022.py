"""megha-2022's experiments (file 002, section VI): Megha against Sparrow and a centralized scheduler, the
datacenter size, GMs x LMs, fairness."""

from __future__ import annotations

from .base import SCENARIOS, Experiment, shape, trace, variant

# ---- megha-2022 (file 002, section VI) -----------------------------------------------------------
# The workshop paper's simulator: Megha with its prototype's processing (V-B, a single-node deployment of the
# HTTP and RabbitMQ prototype; our prototype cost model), heartbeat 10 s; the Sparrow simulator "does not
# consider any overheads other than a constant network delay" (V-B): scenarios/costs_megha_2022.json gives
# the GMs and LMs the prototype's costs and Sparrow's schedulers none.
COSTS_2022 = str(SCENARIOS / "costs_megha_2022.json")
# The alibaba sample (V-A: 8,000 tasks, constraint-augmented; Figs. 6, 8 and 9) is not available: the first
# GOOG_subtrace jobs up to its size stand in, 103 jobs of 7,908 tasks (104 would make 9,912), with the stand-in
# constraint table. The same jobs at the same times on every size: the paper changes the datacenter only.
ALIBABA_JOBS = 103


def megha_2022(quick: bool) -> list[Experiment]:
    """Megha vs Sparrow allocation time (and a sensitivity case without processing time); centralized vs
    Megha at 10,000 and 20,000 workers; Megha at 50,000 (Fig. 8); GMs x LMs; fairness at three sizes with
    intermittent overload."""
    yh = 300 if quick else 0  # quick: the first 300 jobs of YH1_sub; paper scale: the whole sub-trace
    alibaba = {"workload": "trace", "trace": trace("GOOG_subtrace.tr"), "jobs": ALIBABA_JOBS}
    alibaba_note = (f"the paper's alibaba sample (V-A: 8,000 tasks) is not available: the first {ALIBABA_JOBS} "
                    "GOOG_subtrace jobs (7,908 tasks) with the stand-in constraint table stand in, at both scales")
    sparrow = Experiment("vs-sparrow", "Megha vs Sparrow, 10,000 workers, YH1_sub.tr" +
                         (f" first {yh} jobs" if yh else "") + ", no constraints",
                         {**shape(10_000, 10, 10), "workload": "trace", "trace": trace("YH1_sub.tr"), "jobs": yh,
                          "constraints": False, "cost_model": COSTS_2022},
                         "megha,sparrow", plots=("allocation",),
                         note="the paper used a Cloudera sample (V-A: 10,173 tasks) we do not have; YH1_sub stands in "
                              "(the first 300 jobs are 12,200 tasks, the whole sub-trace 122,878). Sparrow's "
                              "schedulers take no processing time, as in the paper's Sparrow simulator (V-B)")
    out = [sparrow]
    for size in (10_000, 20_000):
        out.append(Experiment(f"central-{size // 1000}k", f"centralized vs Megha (10 GMs x 10 LMs), {size:,} "
                              f"workers, GOOG_subtrace.tr first {ALIBABA_JOBS} jobs",
                              {**shape(size, 10, 10), **alibaba}, "megha,centralized", group="central",
                              plots=("allocation",), note=alibaba_note + "; Megha's runs are also Fig. 8's 10,000 "
                              "and 20,000 workers"))
    # Fig. 8: 10 GMs x 10 LMs up to the paper's largest datacenter (V-B: 1,000 to 50,000 workers). Not 1,000:
    # one-slot workers cannot hold the sample's peak demand there (6,780 slots), where the paper's had 64 cores.
    out.append(Experiment("size-50k", f"Megha (10 GMs x 10 LMs), 50,000 workers, GOOG_subtrace.tr first "
                          f"{ALIBABA_JOBS} jobs", {**shape(50_000, 10, 10), **alibaba}, "megha", group="size",
                          plots=("allocation",), note=alibaba_note))
    workers = 30_000
    for g, l in ((5, 5), (5, 20), (10, 10), (20, 10), (20, 20)):
        out.append(Experiment(f"gl-{g}x{l}", f"{g} GMs x {l} LMs, {workers:,} workers, GOOG_subtrace.tr first "
                              f"{ALIBABA_JOBS} jobs", {**shape(workers, g, l), **alibaba}, "megha", group="gms-lms",
                              note=alibaba_note))
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
    out.append(variant(sparrow, "costs-zero", cost_model="zero"))
    return out
