"""``Stream.pick`` over ``Weights``: the index ``weighted_index`` gives, from the same draw, for any weights."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fedemu.fabric.rand import Stream, Weights

_WEIGHT = st.one_of(st.integers(0, 50), st.just(0), st.floats(0.0, 1e6, allow_nan=False, allow_infinity=False))


@given(weights=st.lists(_WEIGHT, min_size=1, max_size=120).filter(lambda w: sum(w) > 0),
       seed=st.integers(0, 2**32), draws=st.integers(1, 40))
def test_pick_gives_weighted_index_from_the_same_draw(weights, seed, draws):
    table = Weights(weights)
    a, b = Stream(seed, "w"), Stream(seed, "w")
    assert [a.pick(table) for _ in range(draws)] == [b.weighted_index(weights) for _ in range(draws)]
    assert a.counter == b.counter


def test_the_ends_of_the_range():
    """A draw past every running sum (rounding) gives the last positive weight, as the pass does; zero
    weights are never picked, at either end."""
    table = Weights([0, 2, 0, 3, 0])
    assert table.last == 3
    s = Stream(1, "ends")
    assert {s.pick(table) for _ in range(400)} == {1, 3}
    with pytest.raises(ValueError, match="positive total weight"):
        Weights([0, 0.0])
