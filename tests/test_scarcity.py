"""Constraint scarcity, the stand-in table's knob: fractions scale as documented, 1 changes nothing, and a
scarcer table gives fewer constrained machines in the built cluster."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fedemu.fabric.errors import ConfigError
from fedemu.fabric.rand import Stream
from fedemu.scenarios import constraints as cons
from fedemu.tools.run import runner

TABLE = cons.ConstraintTable.load()
scarcity = st.floats(min_value=0.05, max_value=50, allow_nan=False)


@given(scarcity)
def test_every_fraction_becomes_min_1_f_over_s(s):
    scaled = TABLE.with_scarcity(s)
    for row, new in zip(TABLE.machine_fraction, scaled.machine_fraction):
        for f, g in zip(row, new):
            assert g == min(1.0, f / s)
            assert (g == 0) == (f == 0)  # a profile that lacks a constraint still lacks it
    assert scaled.task_probability == TABLE.task_probability


@given(scarcity, scarcity)
def test_a_scarcer_table_never_provides_more(s1, s2):
    lo, hi = sorted((s1, s2))
    for a, b in zip(TABLE.with_scarcity(lo).machine_fraction, TABLE.with_scarcity(hi).machine_fraction):
        assert all(x >= y for x, y in zip(a, b))


def test_scarcity_1_is_the_table_itself():
    assert TABLE.with_scarcity(1) is TABLE and TABLE.with_scarcity(1.0) is TABLE


@pytest.mark.parametrize("bad", [0, -1, float("inf"), float("nan"), True, "2"])
def test_a_scarcity_that_is_not_a_positive_number_is_refused(bad):
    with pytest.raises(ConfigError, match="constraint_scarcity is"):
        TABLE.with_scarcity(bad)


def test_scarcer_tables_build_clusters_with_fewer_constrained_machines():
    def provided(s):
        cluster = cons.build_cluster(clusters=3, workers_per_cluster=400, table=TABLE.with_scarcity(s),
                                     stream=Stream(7, "cluster"))
        return sum(len(w.constraints) for w in cluster.workers())
    counts = [provided(s) for s in (0.5, 1, 2, 4)]
    assert counts == sorted(counts, reverse=True) and counts[0] > counts[-1] * 3


def test_the_scenario_knob_reaches_the_run_and_1_keeps_the_digest():
    small = {"jobs": 30, "gms": 2, "lms": 3, "workers_per_partition": 10}
    base = runner.execute("default", seed=3, overrides=small)
    same = runner.execute("default", seed=3, overrides={**small, "constraint_scarcity": 1.0})
    scarce = runner.execute("default", seed=3, overrides={**small, "constraint_scarcity": 2})
    assert same.digest == base.digest
    assert scarce.digest != base.digest
    assert scarce.summary["unschedulable"] >= base.summary["unschedulable"]
