"""The event queue hands entries out in exactly the order a binary heap would."""

import heapq

from hypothesis import given, settings, strategies as st

from fedemu.fabric.events import EventQueue

# An operation: push an entry at a time offset from the last one handed out, pop one, or re-file the
# buckets at a new width. Offsets may be negative (the queue then behaves as a heap would: the entry is
# the next one out) and may land in the bucket being handed out.
OPS = st.lists(st.one_of(st.tuples(st.just("push"), st.integers(-50, 400)),
                         st.tuples(st.just("pop"), st.just(0)),
                         st.tuples(st.just("width"), st.integers(1, 120))), max_size=120)


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
