"""The pieces every paper's experiments share (``tools/reproduce/experiments/PAPER.py``): what `fedemu reproduce` runs for each paper: experiments (one scenario configuration, the schedulers
and policies compared on it), at paper scale or scaled down (``--quick``).

Every experiment runs the ``default`` scenario with explicit overrides, so any run of a report can be
repeated by hand with ``fedemu run default --set ...``. Each paper's experiments use the set-up its own
simulator had (named below, with the source); where the papers are silent or our inputs differ, the
choice is written beside the experiment (``note``) and printed in the report. A sensitivity case is a
copy of some experiments with one thing changed (``variant``, named ``NAME-VARIANT``); the report sets
each claim's verdict on it beside the main one.
"""

from __future__ import annotations

from pathlib import Path

import attrs

DATA = Path(__file__).resolve().parents[4] / "shared" / "data"
TRACES = DATA / "meghanat_megha_simulator" / "traces" / "input"
EC2_TRACES = DATA / "r5by_pigeon" / "deploy" / "ec2" / "template" / "new_trace" / "pigeon_trace"
SCENARIOS = Path(__file__).resolve().parents[3] / "scenarios"
CLAIMS = Path(__file__).resolve().parents[1] / "claims"

VARIANTS = {
    "cs-paper": {
        "text": "The same experiments with PigeonC's constraint-set counts as the paper's section 4.2 describes them "
                "(`cs_counts=paper`: each machine set with its frequency) in place of the authors' simulator's "
                "(`cs_counts=subset-merge`; docs/reproductions/pigeonc.md); Megha's runs are the same runs.",
        "flag": "PigeonC's counts as the paper describes them, not as the authors' code builds them"},
    "standin": {
        "text": "The same experiments with the stand-in constraint table (`constraint_table=standin`, "
                "scenarios/constraint_table.json: invented before the authors' inputs were known, three machine "
                "profiles cycled over the clusters) in place of the authors' table; everything else as above.",
        "flag": ""},
    "yh2": {
        "text": "The Yahoo experiment on the other Yahoo sub-trace of the authors' repository, YH2_sub.tr (3,363 jobs, "
                "137,029 tasks), in place of YH1_sub.tr: how much a claim on Yahoo depends on which part of the "
                "trace stands in for the whole one the paper ran.",
        "flag": ""},
    "third-workers": {
        "text": "The Yahoo experiments on a third of the workers (--quick only: its first 300 jobs on 1,000 workers offer "
                "98% of them over their makespan, the paper's 'about 95%' by that measure, and 2.9 times them while they "
                "arrive, where 3,000 workers get 33% and 97%): long tasks back up at the masters, as at the paper's "
                "high loads.",
        "flag": ""},
    "costs-zero": {
        "text": "The same experiment with no processing time anywhere (`cost_model=zero`) in place of the prototype "
                "cost model, whose 100 us per message no source gives (scenarios/costs_megha_2022.json): how far a "
                "claim on the parts of the allocation time rests on that assumption.",
        "flag": ""},
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


def shape(workers: int, gms: int, lms: int) -> dict:
    return {"gms": gms, "lms": lms, "workers_per_partition": workers // (gms * lms)}


def trace(name: str) -> str:
    return str(TRACES / name)


def only_for(overrides: dict, scheduler: str) -> dict:
    """``overrides`` without the keys that belong to other schedulers only (an experiment of one scheduler
    may not set another's keys)."""
    from fedemu.actors.registry import SCHEDULERS

    own = {name for s in SCHEDULERS.values() for name in s.param_names}
    return {k: v for k, v in overrides.items() if k not in own or k in SCHEDULERS[scheduler].param_names}


def variant(e: Experiment, name: str, **overrides) -> Experiment:
    """``e`` as the sensitivity case ``name``, with ``overrides`` changed."""
    return attrs.evolve(e, name=f"{e.name}-{name}", overrides={**e.overrides, **overrides}, variant=name,
                        group=f"sensitivity-{name}", note=(e.note + "; " if e.note else "") + VARIANTS[name]["text"])
