"""pigeon-2019's experiments (file 001, sections 3, 4 and 5): the worked example, section 3's model and its
Fig. 2 comparison with Sparrow, the traces (Table 1, Figs. 5-7, W), EC2; Eagle's side."""

from __future__ import annotations

import math


from .base import CLAIMS, EC2_TRACES, Experiment, only_for, trace, variant

# ---- pigeon-2019 (file 001, sections 3, 4 and 5) ---------------------------------------------------
# The Pigeon simulator: no processing time (section 4.1: "without knowing the exact processing overhead ...
# we have not taken this overhead into account"), 0.5 ms links, no constraints.
EXAMPLE_TRACE = CLAIMS / "pigeon-example.tr"  # section 4.1: jobs A, B, C at time 0
ZERO = {"cost_model": "zero", "constraints": False}
# Eagle (actors/eagle) runs beside Pigeon with the Eagle paper's reserved pool, as the Pigeon paper's 4.1
# gives it (2% Yahoo, 17% Google; 10% on EC2), and otherwise its simulator's defaults.
EAGLE_RESERVED = {"yahoo": 0.02, "google": 0.17, "ec2": 0.1}
# section 4.1: the short/long cutoffs (Eagle's), and Pigeon's reserved workers per trace
CUTOFF = {"yahoo": 90.5811, "google": 1129.532}
RESERVED = {"yahoo": 0.02, "google": 0.09}


def _model(workers: int, group: int, load: float, jobs: int, fanout: int) -> dict:
    """Section 3's simulation (Figs. 3-4): jobs of ``fanout`` tasks of exponential time, mean 100 ms, Poisson
    arrivals at ``load``; one class of jobs (one queue: no reserved workers)."""
    return {**ZERO, "gms": 1, "lms": workers // group, "workers_per_partition": group, "workload": "poisson",
            "load": load, "fanout": fanout, "task_s": 0.1, "task_dist": "exp", "jobs": jobs, "reserved_fraction": 0}


def _section3(quick: bool) -> list[Experiment]:
    """Figs. 3-4: groups of 50, 100 and 200 at 90% load, of 100 and 200 at 80%, of 100 at 70% (and 60% at paper
    scale, for Fig. 2); the same model-100-90 with instant messages; Sparrow at Fig. 2's loads."""
    # Paper scale: the paper's Nc = 30,000 and F = 100, 10,000 jobs at 90% (3.7 s of simulated time), 5,000 below
    # (where nearly every job finds idle workers).
    # Quick: F = 5 on 1,000 workers: Eq. 6 does not depend on F (the longest task and the gap to the second
    # longest decide), the model asks only F <= Ng (200-worker groups: 5), and the same number of tasks
    # then covers twenty times the simulated time, past the groups' warm-up from empty.
    nc, fanout = (1_000, 5) if quick else (30_000, 100)
    jobs = (lambda load: 3_000 if load >= 0.9 else 1_500) if quick else (lambda load: 10_000 if load >= 0.9 else 5_000)
    out = []
    grid = ((100, 0.7), (100, 0.8), (100, 0.9), (50, 0.9), (200, 0.8), (200, 0.9)) + (() if quick else ((100, 0.6),))
    for group, load in grid:
        n = jobs(load)
        out.append(Experiment(f"model-{group}-{round(load * 100)}",
                              f"section 3's simulation: {nc:,} workers in groups of {group}, F = {fanout} tasks of "
                              f"exponential time (mean 100 ms), load {load:.0%}, {n:,} jobs",
                              _model(nc, group, load, n, fanout), "pigeon", group="model",
                              note="" if not quick else f"F = {fanout} on {nc:,} workers in place of the paper's "
                                                        "F = 100 on 30,000 (Eq. 6 does not depend on F)"))
    # the cause of the model's gap: the same run as model-100-90 with messages that take no time, so a master
    # learns at once that a worker is free (the analysis has no such round trip)
    n = jobs(0.9)
    out.append(Experiment("model-100-90-nolatency", f"model-100-90 with instant messages (latency 0): {nc:,} workers "
                          f"in groups of 100, F = {fanout}, load 90%, {n:,} jobs",
                          {**_model(nc, 100, 0.9, n, fanout), "latency_ms": 0}, "pigeon", group="model",
                          note="the analysis's M/M/Nw queue: a worker is free for its master the moment its task "
                               "ends, where a 0.5-ms link keeps it from the next task for a round trip (its idle "
                               "notice, then the launch)"))
    # Fig. 2 compares Pigeon (groups of 100) and Sparrow at loads 0.2 and 0.4 apart, F = 50 (a) and 100 (b).
    # Pigeon's side is the model runs above (its zero-queuing probability hardly depends on F, Eq. 6);
    # Sparrow's needs the paper's F: quick runs Fig. 2(a)'s F = 50 on 5,000 workers, paper scale Fig. 2(b)'s
    # F = 100 on 30,000, as the model runs.
    nc2, f2 = (5_000, 50) if quick else (30_000, 100)
    for load in (50,) if quick else (40, 50, 60):
        n2 = 500 if quick else 10_000 if load == 50 else 5_000
        sparrow = {k: v for k, v in _model(nc2, 100, load / 100, n2, f2).items() if k != "reserved_fraction"}
        out.append(Experiment(f"fig2-sparrow-{load}", f"Sparrow, {nc2:,} workers, F = {f2} (2F probes), exponential "
                              f"tasks, load {load}%, {n2:,} jobs (Fig. 2's comparison)", sparrow, "sparrow",
                              group="fig2", note="Fig. 2 is the paper's analysis (Eq. 4), with every task of a job "
                                                 "as long; this is its simulation, with section 3's exponential "
                                                 "tasks"))
    return out


def _traces(quick: bool) -> list[Experiment]:
    """Yahoo at the paper's cluster sizes (3K: about 95% load, section 4.2), group sizes against Pigeon with one
    group at high and medium load (Fig. 5), W (4.1); Google at the paper's smallest size."""
    # The paper's cluster sizes. YH1_sub's 2,910 jobs offer 2,859 busy workers over their makespan (95% of
    # 3,000: the paper's "about 95%" at 3K) and 3,227 while they arrive (108%). Quick runs each trace's first
    # 300 jobs, which offer 2,918 busy workers while they arrive (97% of 3,000) and 982 over their makespan.
    jobs = 300 if quick else 0
    first = f", first {jobs} jobs" if jobs else ""
    yh_note = ("YH1_sub.tr (2,910 jobs, 122,878 tasks) is a sub-trace of the paper's Yahoo trace (24,262 jobs); "
               "the offered_load_mean and arrival_load columns of runs.csv give the load it offers here")

    def yahoo(workers: int, **more) -> dict:
        return {**ZERO, "gms": 1, "lms": workers // 100, "workers_per_partition": 100, "workload": "trace",
                "trace": trace("YH1_sub.tr"), "jobs": jobs, "short_cutoff_s": CUTOFF["yahoo"],
                "reserved_fraction": RESERVED["yahoo"], **more}

    out = []
    high, medium = 3_000, 4_500  # Fig. 5: about 93% and 62% load (Cloudera at 12K and 18K: the same ratio)
    for size in (3, 6):  # Figs. 6-7: 3K to 6K workers
        w = size * 1_000
        out.append(Experiment(f"yahoo-{size}k", f"YH1_sub.tr{first}, {w:,} workers in {w // 100} groups of 100 (the "
                              f"paper's {size}K), 2% reserved, W = 20", yahoo(w), "pigeon", group="yahoo",
                              note=yh_note))
    for name, workers in (("high", high), ("med", medium)):
        for g in (25, 50, 100):
            if name == "high" and g == 100:
                continue  # yahoo-3k
            out.append(Experiment(f"fig5-{name}-g{g}", f"YH1_sub.tr{first}, {workers:,} workers in groups of {g} "
                                  f"(Fig. 5, {name} load)", yahoo(workers, masters=workers // g), "pigeon",
                                  group="fig5", note=yh_note + "; the paper's Fig. 5 ran Cloudera (not available)"))
        out.append(Experiment(f"fig5-{name}-central", f"YH1_sub.tr{first}, {workers:,} workers in one group: Pigeon's "
                              f"centralized counterpart (4.1; Fig. 5, {name} load)", yahoo(workers, masters=1),
                              "pigeon", group="fig5",
                              note=yh_note + "; one master over every worker, with the same two fair queues, W = 20 "
                                             "and 2% reserved workers ('the case when Pigeon degenerates to a "
                                             "centralized scheduler', 4.1)"))
    for w in (5, 10, math.inf):
        out.append(Experiment(f"yahoo-3k-w{w}", f"YH1_sub.tr{first}, {high:,} workers, W = {w}", yahoo(high, fqw=w),
                              "pigeon", group="weight", note=yh_note + "; section 4.1 varies W (W = 20 is yahoo-3k)"))
    go_note = ("GOOG_subtrace.tr (10,000 jobs, 312,558 tasks) is a window of the Google trace the paper ran; its "
               "load at the paper's sizes is in the offered-load and arrival-load columns")
    w = 11_000  # Figs. 6-7: 11K (the smallest) to 19K workers
    out.append(Experiment("google-11k", f"GOOG_subtrace.tr{first}, {w:,} workers in groups of 100 (the paper's 11K), "
                          "9% reserved, W = 20",
                          {**yahoo(w), "trace": trace("GOOG_subtrace.tr"), "short_cutoff_s": CUTOFF["google"],
                           "reserved_fraction": RESERVED["google"]}, "pigeon", group="google", note=go_note))
    return out


def _ec2() -> list[Experiment]:
    """Section 5's EC2 set-up on the NGO traces (the whole traces at --quick too: 10,291 tasks each)."""
    ec2 = {**ZERO, "gms": 1, "lms": 3, "workers_per_partition": 40, "distributors": 10, "reserved_fraction": 0.1,
           "fqw": math.inf, "short_cutoff_s": 1, "workload": "trace"}
    return [Experiment(f"ec2-{load}", f"section 5's EC2 set-up: 120 workers in 3 groups of 40, NGO_trace{load} "
                       "(5,001 Google-derived jobs)", {**ec2, "trace": str(EC2_TRACES / f"NGO_trace{load}")},
                       "pigeon,sparrow", group="ec2",
                       note="10 schedulers (distributors), 10% reserved workers, W = inf, short/long cutoff 1 s "
                            "as on EC2; the masters are actors of their own here (a worker there); the "
                            "simulation's settings (no processing time)")
            for load in (50, 60, 70, 80, 90)]


def _eagle(runs: list[Experiment]) -> list[Experiment]:
    """Eagle's side of Figs. 6-8: each trace and EC2 experiment again with Eagle and its own reserved pool."""
    out = []
    for e in runs:
        kind = "ec2" if e.name.startswith("ec2") else e.name.split("-")[0]
        out.append(Experiment(f"{e.name}-eagle", e.title.replace("Pigeon", "Eagle") + " (Eagle)",
                              only_for({**e.overrides, "reserved_fraction": EAGLE_RESERVED[kind]}, "eagle"), "eagle", group="eagle",
                              note=f"Eagle's reserved pool {EAGLE_RESERVED[kind]:.0%} (4.1, as the Eagle paper set "
                                   "it); the rest as the Pigeon run"))
    return out


def pigeon_2019(quick: bool) -> list[Experiment]:
    """The worked example; section 3's model runs (group sizes and loads) and Fig. 2's pairs against Sparrow;
    Yahoo at the paper's sizes, group sizes against one group (Fig. 5) and W; Google; section 5's EC2 set-up
    against Sparrow; Eagle's side."""
    out = [Experiment("example", "section 4.1: 4 workers in 2 groups of 2; job A (20,1,1,10,10,10), B (2), C (2) at 0",
                      {**ZERO, "gms": 1, "lms": 2, "workers_per_partition": 2, "workload": "trace",
                       "trace": str(EXAMPLE_TRACE), "latency_ms": 0, "distributors": 1, "reserved_fraction": 0},
                      "pigeon,centralized", group="example", seeds="1,2,3,4,5,6,7,8",
                      note="no communication time and no reserved workers, as in the example; eight seeds, "
                           "whatever --seeds says: Pigeon sends each one-task job to a random master (as the "
                           "real Pigeon, which shuffles the masters per job), so its sum is one of 30, 36 and 46")]
    out += _section3(quick)
    traces = _traces(quick)
    ec2 = _ec2()
    out += traces + ec2
    # how much the Yahoo claims depend on which window of the trace stands in for it: YH2_sub.tr
    out += [variant(e, "yh2", trace=trace("YH2_sub.tr")) for e in traces if e.name in ("yahoo-3k", "yahoo-6k")]
    if quick:  # and on the load: the same 300 jobs on a third of the workers (W's effect needs a backlog)
        out += [variant(e, "third-workers", lms=e.overrides["lms"] // 3,
                        **({"masters": e.overrides["masters"] // 3} if e.overrides.get("masters", 0) > 1 else {}))
                for e in traces if e.name.startswith(("yahoo-3k", "fig5-high"))]
    out += _eagle([e for e in traces if e.name in ("yahoo-3k", "yahoo-6k", "google-11k")] + ec2)
    return out
