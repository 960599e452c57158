"""``Stream.pick`` over ``Weights`` (and ``weighted_index``, which is it): the index a pass over the weights
gives, from the same one draw, for any weights."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fedemu.fabric.rand import Stream, Weights

_WEIGHT = st.one_of(st.integers(0, 50), st.just(0), st.floats(0.0, 1e6, allow_nan=False, allow_infinity=False))


def passed(stream: Stream, weights) -> int:
    """The model: one draw scaled by the total, then the first positive weight whose running sum passes it
    (the last positive weight when rounding leaves the draw past them all)."""
    x = stream.random() * sum(weights)
    acc, last = 0.0, 0
    for i, w in enumerate(weights):
        if w > 0:
            acc += w
            last = i
            if x < acc:
                return i
    return last


@given(weights=st.lists(_WEIGHT, min_size=1, max_size=120).filter(lambda w: sum(w) > 0),
       seed=st.integers(0, 2**32), draws=st.integers(1, 40))
def test_pick_gives_the_index_of_a_pass_from_the_same_draw(weights, seed, draws):
    table = Weights(weights)
    a, b, c = Stream(seed, "w"), Stream(seed, "w"), Stream(seed, "w")
    expected = [passed(c, weights) for _ in range(draws)]
    assert [a.pick(table) for _ in range(draws)] == expected
    assert [b.weighted_index(weights) for _ in range(draws)] == expected
    assert a.counter == b.counter == c.counter == draws


def test_the_ends_of_the_range():
    """A draw past every running sum (rounding) gives the last positive weight, as the pass does; zero
    weights are never picked, at either end."""
    table = Weights([0, 2, 0, 3, 0])
    assert table.last == 3
    s = Stream(1, "ends")
    assert {s.pick(table) for _ in range(400)} == {1, 3}
    for zero in ([0, 0.0], []):
        with pytest.raises(ValueError, match="positive total weight"):
            Weights(zero)
        with pytest.raises(ValueError, match="positive total weight"):
            s.weighted_index(zero)


@given(seed=st.integers(0, 2**64 - 1), name=st.text(max_size=8), start=st.integers(0, 2**62), n=st.integers(0, 300))
def test_randoms_are_the_next_draws_of_random(seed, name, start, n):
    """``randoms(n)`` is ``n`` calls of ``random()`` at once: the same floats, bit for bit, and the counter
    where those calls leave it, so the draw after them is the same too."""
    a, b = Stream(seed, name), Stream(seed, name)
    a.counter = b.counter = start
    assert a.randoms(n).tolist() == [b.random() for _ in range(n)]
    assert a.counter == b.counter == start + n
    assert a.random() == b.random()
