"""The Pigeon paper's analytic model (tools/reproduce/group_queueing.py) against values worked by hand, Erlang C's known
limits, and the paper's own readings of its Figs. 2 and 3."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fedemu.tools.reproduce import group_queueing as gq


def test_one_worker_is_an_mm1_queue():
    # M/M/1: a task waits with probability rho, and waits rho/(1 - rho) task times on average
    assert gq.erlang_c(1, 0.5) == pytest.approx(0.5)
    assert gq.task_wait(1, 0.5, 2.0) == pytest.approx(2.0)


def test_two_workers_by_hand():
    # M/M/2 at rho = 0.5 (a = 1 Erlang): C = (a^2/2!)/(1 - rho) / (1 + a + (a^2/2!)/(1 - rho)) = 1 / 3
    assert gq.erlang_c(2, 0.5) == pytest.approx(1 / 3)
    assert gq.task_zero_queue(2, 0.5) == pytest.approx(2 / 3)  # Eq. 1
    assert gq.task_wait(2, 0.5, 0.1) == pytest.approx(0.1 / 3)  # Eq. 2: C / (Nw/Te - lambda_t) = (1/3) / (20 - 10)
    assert gq.job_zero_queue_equal(2, 0.5, 3) == pytest.approx((2 / 3) ** 3)  # Eq. 3
    assert gq.job_zero_queue_exp(2, 0.5) == pytest.approx(2 / 3 * math.exp(-1 / 3))  # Eq. 6: Tq/Te = 1/3


def test_batch_probing_by_hand():
    # Eq. 4 with F = 1: two probes, at least one idle: 1 - rho^2; with F = 2: four probes, two or more idle
    assert gq.probe_job_zero_queue(0.5, 1) == pytest.approx(0.75)
    assert gq.probe_job_zero_queue(0.3, 2) == pytest.approx(1 - 0.3 ** 4 - 4 * 0.7 * 0.3 ** 3)
    assert gq.probe_job_zero_queue(0.0, 100) == 1.0


def test_the_erlang_b_recursion_matches_eq1_where_the_factorials_fit():
    for nw, rho in ((10, 0.7), (100, 0.9), (120, 0.95)):
        a = nw * rho
        top = a ** nw / math.factorial(nw) / (1 - rho)
        eq1 = top / (sum(a ** k / math.factorial(k) for k in range(nw)) + top)
        assert gq.erlang_c(nw, rho) == pytest.approx(eq1, rel=1e-9)


@given(st.integers(1, 2000), st.floats(0.0, 0.995))
def test_probabilities_stay_probabilities_and_larger_groups_queue_less(nw, rho):
    c = gq.erlang_c(nw, rho)
    assert 0.0 <= c <= 1.0
    assert gq.erlang_c(nw + 1, rho) <= c + 1e-12  # multiplexing gain: one more worker never hurts
    assert 0.0 <= gq.job_zero_queue_exp(nw, rho) <= gq.task_zero_queue(nw, rho) + 1e-12


@pytest.mark.parametrize("bad", [(0, 0.5), (10, 1.0), (10, -0.1), (2.5, 0.5)])
def test_out_of_range_is_refused(bad):
    with pytest.raises(ValueError):
        gq.erlang_c(*bad)


def test_the_papers_reading_of_fig2():
    """Section 3 on Fig. 2 (F = 100): Sparrow 'starts to drop at load 0.4 and quickly drops to near zero at
    load 0.6'; Pigeon's drops are 'in a much higher load region, i.e., 0.6 to 0.8', '20 - 40% higher load';
    groups of 200 start to drop about 0.1 later and are near zero at 0.9."""
    sparrow = lambda r: gq.probe_job_zero_queue(r, 100)  # noqa: E731
    g100 = lambda r: gq.job_zero_queue_equal(100, r, 100)  # noqa: E731
    g200 = lambda r: gq.job_zero_queue_equal(200, r, 100)  # noqa: E731
    assert sparrow(0.4) > 0.99 and sparrow(0.6) < 0.01
    assert g100(0.6) > 0.99 and g100(0.8) < 0.2
    for level in (0.99, 0.9, 0.5):  # the load shift at which Pigeon reaches Sparrow's probability
        assert 0.2 <= gq.drop_load(g100, level) - gq.drop_load(sparrow, level) <= 0.4
        assert 0.05 <= gq.drop_load(g200, level) - gq.drop_load(g100, level) <= 0.1
    assert g200(0.9) < 0.01


def test_the_papers_reading_of_fig3():
    # 'the job-zero-queuing probability is low (below 60%)' at Nw = 50 and 90% load (Eq. 6)
    assert gq.job_zero_queue_exp(50, 0.9) < 0.6
    # and larger groups do better: 50 -> 100 -> 200
    assert gq.job_zero_queue_exp(50, 0.9) < gq.job_zero_queue_exp(100, 0.9) < gq.job_zero_queue_exp(200, 0.9)


def test_drop_load_finds_the_crossing():
    assert gq.drop_load(lambda r: 1 - r, 0.25) == pytest.approx(0.75, abs=1e-5)
    assert gq.drop_load(lambda r: 0.1, 0.5) == 0.0  # already below
    assert gq.drop_load(lambda r: 1.0, 0.5) == 0.999  # never below


def test_the_curves_table_has_a_row_per_load():
    table = gq.curves((0.4, 0.9)).splitlines()
    assert len(table) == 4 and table[0].startswith("| load | Eq. 6, Nw=50")
    assert table[3].startswith("| 0.9 | 0.591 | 0.766 | 0.901 | 7.277 | 2.169 | 0.472 |")
