"""The event queue hands entries out in exactly the order a binary heap would."""

import heapq

from hypothesis import given, settings, strategies as st

from fedemu.fabric.events import EventQueue

# An operation: push an entry at a time offset from the last one handed out, pop one, or re-file the
# buckets at a new width. Offsets may be negative (the queue then behaves as a heap would: the entry is
# the next one out) and may land in the bucket being handed out.
OPS = st.lists(st.one_of(st.tuples(st.just("push"), st.integers(-50, 400)),
                         st.tuples(st.just("pop"), st.just(0)),
                         st.tuples(st.just("deliver"), st.integers(1, 40)),
                         st.tuples(st.just("width"), st.integers(1, 120))), max_size=120)


def deliver(queue, n):
    """Take up to ``n`` entries the way the kernel's delivery loop does: ``first`` once, then
    ``current`` and ``pos`` directly, ``next_bucket`` when the current bucket is used up."""
    out = []
    if queue.first() is None:
        return out
    cur, pos = queue.current, queue.pos
    while len(out) < n:
        if pos >= len(cur):
            queue.pos = pos
            if queue.next_bucket() is None:
                break
            cur, pos = queue.current, 0
        out.append(cur[pos])
        pos += 1
    queue.pos = pos
    return out


@settings(max_examples=300, deadline=None)
@given(width=st.integers(1, 100), ops=OPS)
def test_the_queue_pops_in_heap_order(width, ops):
    queue, heap = EventQueue(width), []
    last = seq = 0
    for op, arg in ops:
        if op == "push":
            seq += 1
            entry = (max(0, last + arg), seq % 3, seq, "payload")
            queue.push(entry)
            heapq.heappush(heap, entry)
        elif op == "pop":
            got = queue.pop()
            assert got == (heapq.heappop(heap) if heap else None)
            if got is not None:
                last = got[0]
        elif op == "deliver":
            got = deliver(queue, arg)
            assert got == [heapq.heappop(heap) for _ in range(min(arg, len(heap)))]
            if got:
                last = got[-1][0]
        else:
            queue.rebucket(arg)
        assert len(queue) == len(heap) and bool(queue) == bool(heap)
        assert queue.first() == (heap[0] if heap else None)
    assert [queue.pop() for _ in range(len(heap))] == sorted(heap)
    assert queue.pop() is None and not queue


def test_a_send_lands_in_a_later_bucket_and_a_timer_in_the_current_one():
    queue = EventQueue(100)
    queue.push((250, 1, 0))
    assert queue.pop() == (250, 1, 0)  # bucket 2 is now being handed out
    queue.push((299, 2, 1))  # a timer due inside it: inserted in place
    queue.push((260, 2, 2))
    queue.push((300, 1, 3))  # a later bucket
    assert [queue.pop() for _ in range(3)] == [(260, 2, 2), (299, 2, 1), (300, 1, 3)]


def test_many_entries_pushed_into_the_current_bucket_are_merged_in_order():
    queue = EventQueue(100)
    for t in (210, 240, 280):
        queue.push((t, 1, t))
    assert queue.pop() == (210, 1, 210)  # bucket 2 is being handed out, 240 and 280 are left
    late = [(t, 2, t) for t in range(295, 215, -5)]  # more than are inserted one by one, out of order
    for entry in late:
        queue.push(entry)
    assert len(queue) == 2 + len(late)
    assert [queue.pop() for _ in range(len(queue))] == sorted(late + [(240, 1, 240), (280, 1, 280)])


def test_the_next_bucket_starts_with_what_was_pushed_into_the_used_up_one():
    queue = EventQueue(100)
    queue.push((250, 1, 0))
    assert queue.pop() == (250, 1, 0)  # bucket 2 is used up
    queue.push((400, 1, 1))
    queue.push((270, 2, 2))  # into bucket 2 all the same
    assert queue.next_bucket() == (270, 2, 2)  # as the delivery loop calls it: before bucket 4
    assert (queue.current, queue.pos) == ([(270, 2, 2)], 0)
    assert [queue.pop() for _ in range(2)] == [(270, 2, 2), (400, 1, 1)]
