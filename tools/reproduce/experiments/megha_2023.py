"""megha-2023's experiments (file 000, sections 2.3, 5-7): Megha against PigeonC on the authors' set-up."""

from __future__ import annotations

from .base import Experiment, only_for, shape, trace, variant

# ---- megha-2023 (file 000, sections 2.3, 5-7) ----------------------------------------------------
# The authors' simulator (meghanat/megha-constraint-aware at b503dbc; figures in
# shared/papers/megha-2023-setup.md): its constraint tables, a task no machine can run dropped, no
# processing time, 0.5 ms links, LM heartbeat 5 s, PigeonC's 10 distributors with FQW 20 and a 2 s
# short/long cutoff (every syn job is short), no reserved workers (PigeonC has none). The repository's one
# configuration is the syn_N one; for the traces the short/long cutoffs are those of the Pigeon and Eagle
# simulators (Pigeon 2019, 4.1: 90.5811 s for Yahoo, 1129.532 s for Google). PigeonC's distributors weigh the
# masters by the constraint-set counts as that simulator builds them (cs_counts=subset-merge,
# actors/pigeon/constraint_sets.py); the paper's own description of them is a sensitivity case.
CUTOFF = {"yahoo": 90.5811, "google": 1129.532}
AUTHORS_2023 = {"constraint_table": "megha-2023", "infeasible": "drop-task", "cost_model": "zero", "heartbeat_s": 5,
                "latency_ms": 0.5, "short_cutoff_s": 2, "distributors": 10, "fqw": 20, "cs_counts": "subset-merge"}


def _dc_2023(workers: int) -> dict:
    """Megha 5 GMs x 5 LMs over ``workers``; PigeonC's masters of 100 workers over the same machine list."""
    return {**shape(workers, 5, 5), "masters": workers // 100}


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
    yahoo = {**AUTHORS_2023, **_dc_2023(10_000), "workload": "trace", "trace": trace("YH1_sub.tr"), "jobs": yh_jobs,
             "short_cutoff_s": CUTOFF["yahoo"]}
    google = {**AUTHORS_2023, **_dc_2023(20_000), "workload": "trace", "trace": trace("GOOG_subtrace.tr"),
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
    out.append(Experiment("yahoo-free", "Yahoo without constraints: Megha, Sparrow, Pigeon and Eagle (section 2.2)",
                          unconstrained(yahoo), "megha,sparrow,pigeon,eagle", group="no-constraints",
                          note=yh_note + "; the earlier comparison (section 2.2, [15]) is not described further, "
                               "so the authors' 2023 set-up is kept, constraints off; Pigeon with 100 masters, "
                               "2% reserved workers, W = 20; Eagle with 2% reserved, as the Pigeon paper's 4.1 "
                               "sets it for Yahoo, and its simulator's defaults"))
    out.append(Experiment("google-free", "Google without constraints: Megha, Sparrow and Pigeon (section 2.2)",
                          unconstrained(google), "megha,sparrow,pigeon", group="no-constraints",
                          note="as yahoo-free"))
    out.append(Experiment("google-free-eagle", "Google without constraints: Eagle (section 2.2)",
                          only_for({**unconstrained(google), "reserved_fraction": 0.17}, "eagle"), "eagle",
                          group="no-constraints",
                          note="as google-free, with Eagle's 17% reserved workers for Google (the Pigeon paper's 4.1, "
                               "from Eagle's own paper); its own experiment because Pigeon's reserve in google-free "
                               "is another"))
    for e in out[:4]:
        out.append(variant(e, "cs-paper", cs_counts="paper"))
    if quick:  # the stand-in table predates the authors' inputs: a check of how much a claim leans on the table
        for e in out[:3]:
            out.append(variant(e, "standin", constraint_table="standin"))
    out.append(variant(out[3], "yh2", trace=trace("YH2_sub.tr")))
    return out
