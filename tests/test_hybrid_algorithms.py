"""Hawk's and Eagle's central algorithms against small brute-force models: least-waiting-time placement and its
view (``policies.least_waiting``), the stealing choice (``actors.hawk.stealing``), the bounded SRPT queue order
(``actors.eagle.queue_order``) and the SSS bitmap (``actors.eagle.bitmap``)."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from fedemu.actors.eagle import queue_order
from fedemu.actors.eagle.bitmap import EagleWaitingView, clear_positions, is_set
from fedemu.actors.hawk.stealing import runs_on, stealable
from fedemu.policies.least_waiting import WaitingView

loads = st.lists(st.integers(0, 50), min_size=1, max_size=12)


def _view(load, running, rtt=0):
    v = WaitingView(len(load), rtt)
    for p, x in enumerate(load):
        if x:
            v.add(p, x)
    for p, (start, est) in running.items():
        if v.load[p]:
            v.started(p, ("t", p), start, est)
    return v


@st.composite
def views(draw):
    load = draw(loads)
    running = {p: (draw(st.integers(0, 40)), draw(st.integers(1, 30))) for p in range(len(load))
               if load[p] and draw(st.booleans())}
    return load, running, draw(st.integers(0, 3))


@settings(max_examples=300, deadline=None)
@given(views(), st.integers(1, 20), st.integers(1, 15), st.integers(40, 80), st.data())
def test_least_waiting_places_each_task_on_the_least_waiting_worker(view, count, est, now, data):
    """Brute force: the tasks one at a time, each on the position of least waiting time (ties: the lowest), that
    position's waiting time then grown by the estimate; unless ``count`` positions hold no long work at all,
    when the lowest of those take one task each (the simulator's shortcut)."""
    load, running, rtt = view
    positions = sorted(data.draw(st.sets(st.integers(0, len(load) - 1), min_size=1)))
    v = _view(load, running, rtt)
    waits = {p: v.wait_us(p, now) for p in positions}
    empty = [p for p in positions if not v.load[p]]
    expected = []
    if len(empty) >= count:
        expected = empty[:count]
    else:
        for _ in range(count):
            p = min(positions, key=lambda q: (waits[q], q))
            expected.append(p)
            waits[p] += est
    before = list(v.load)
    assert v.place(count, est, positions, now) == expected
    for p in positions:
        assert v.load[p] == before[p] + est * expected.count(p)


@given(views(), st.integers(40, 80))
def test_a_waiting_time_is_the_long_work_left(view, now):
    """Load less what the running tasks have run (each at most its estimate), plus a round trip while one runs;
    never below 0; 0 without load."""
    load, running, rtt = view
    v = _view(load, running, rtt)
    for p, x in enumerate(load):
        ran = [min(now - s, e) for s, e in v.running[p].values()]
        want = 0 if not x else (x if not ran else max(0, rtt + x - sum(ran)))
        assert v.wait_us(p, now) == want


@settings(max_examples=200)
@given(st.integers(1, 20), st.lists(st.tuples(st.sampled_from(["add", "remove", "clear"]), st.integers(0, 19),
                                              st.integers(0, 9)), max_size=60))
def test_the_bitmap_follows_the_view(size, ops):
    """The SSS bitmap's bit p is set exactly while the view holds long work on p, whatever the order of adds,
    removals (never below 0) and clears."""
    v = EagleWaitingView(size)
    model = [0] * size
    for op, p, x in ops:
        p %= size
        if op == "add":
            v.add(p, x)
            model[p] += x
        elif op == "remove":
            v.remove(p, x)
            model[p] = max(0, model[p] - x)
        else:
            v.clear(p)
            model[p] = 0
        assert v.load == model
        assert [is_set(bytes(v.bits), q) for q in range(size)] == [m > 0 for m in model]
        assert v.busy_count == sum(m > 0 for m in model)
    bits = bytes(v.bits)
    assert clear_positions(bits, range(size)) == [q for q in range(size) if not model[q]]
    assert not is_set(b"", 3) and clear_positions(b"", [0, 9]) == [0, 9]


def _steal_model(longs, running_long, limit):
    """The simulator's rule in words: the first short entries after the first run of long entries (from the
    front when the victim runs a long task, else after its unblocked shorts), up to ``limit``."""
    n = len(longs)
    first_long = 0 if running_long else next((i for i in range(n) if longs[i]), n)
    after = next((i for i in range(first_long, n) if not longs[i]), n)
    if not running_long and first_long == n:
        return []
    out = []
    for i in range(after, n):
        if longs[i] or len(out) == limit:
            break
        out.append(i)
    return out


@given(st.lists(st.booleans(), max_size=15), st.booleans(), st.integers(1, 6))
def test_stealing_takes_the_shorts_behind_the_first_long_ones(longs, running_long, limit):
    got = stealable(longs, running_long, limit)
    assert got == _steal_model(longs, running_long, limit)
    assert all(not longs[i] for i in got) and len(got) <= limit
    if not any(longs) and not running_long:
        assert got == []  # nothing blocks the shorts: nothing to steal


def test_a_thief_gets_only_what_it_can_run():
    assert runs_on((1, 2), (1,), (1, 2, 3), (2,))
    assert not runs_on((4,), (1,), (1, 2, 3), (2,))
    assert not runs_on((), (3,), (), (2,))


class R:
    def __init__(self, long, remaining, est, delay=0):
        self.long, self.remaining_us, self.estimate_us, self.delay_us = long, remaining, est, delay

    def __repr__(self):
        return f"R({self.long}, {self.remaining_us}, {self.estimate_us}, {self.delay_us})"


entries = st.builds(R, st.booleans(), st.integers(0, 100), st.integers(0, 20), st.integers(0, 60))


def _order_model(queue, bound):
    """The rule as stated: a long entry at the front first; else the least remaining (earliest of equals) among
    the entries whose estimate fits every short entry's slack in front of them; a long one so found ends the
    scan (nothing behind it is looked at)."""
    if not queue:
        return -1
    if queue[0].long:
        return 0
    best = -1
    for pos, r in enumerate(queue):
        slack = min((bound * q.estimate_us - q.delay_us for q in queue[:pos] if not q.long), default=math.inf)
        if r.estimate_us > slack:
            continue
        if best < 0 or r.remaining_us < queue[best].remaining_us:
            best = pos
            if r.long:
                break
    return best


@settings(max_examples=500)
@given(st.lists(entries, max_size=10), st.sampled_from([0.0, 1.0, 2.5, 5.0, math.inf]))
def test_srpt_with_bound_serves_the_least_remaining_that_fits_every_slack(queue, bound):
    assert queue_order.choose(queue, bound) == _order_model(queue, bound)


@settings(max_examples=300)
@given(st.lists(st.tuples(st.integers(0, 100), st.integers(1, 20)), min_size=1, max_size=12),
       st.sampled_from([0.0, 1.0, 5.0]))
def test_no_short_reservation_waits_past_its_bound(jobs, bound):
    """Serve a queue of short reservations to the end in the bounded order, each service delaying those it
    passes: no reservation is ever delayed by more than ``bound`` times its own estimate (the simulator asserts
    the same)."""
    queue = [R(False, rem, est) for rem, est in jobs]
    while queue:
        pos = queue_order.choose(queue, bound)
        assert pos >= 0
        served = queue.pop(pos)
        queue_order.passed(queue, pos, served.estimate_us)
        assert all(q.delay_us <= bound * q.estimate_us for q in queue)
