"""pigeon-2019's experiments (file 001, sections 3, 4 and 5): the worked example, section 3's model, Yahoo, EC2."""

from __future__ import annotations

import math

from .base import CLAIMS, EC2_TRACES, Experiment, trace

# ---- pigeon-2019 (file 001, sections 3, 4 and 5) ---------------------------------------------------
# The Pigeon simulator: no processing time (section 5: "without knowing the exact processing overhead ...
# we have not taken this overhead into account"), 0.5 ms links, no constraints.
EXAMPLE_TRACE = CLAIMS / "pigeon-example.tr"  # section 4.1: jobs A, B, C at time 0
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
             "trace": trace("YH1_sub.tr"), "jobs": yh}
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
