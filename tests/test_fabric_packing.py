"""A batch of journal records packed at once is byte for byte the records packed one at a time by msgpack."""

import collections
import enum

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fedemu.fabric import messages, packing

from fabric_helpers import Box, Probe

pytestmark = pytest.mark.unit

Pair = collections.namedtuple("Pair", "a b")  # a tuple subclass: msgpack packs it as an array


class Size(enum.IntEnum):
    SMALL = 1


class Ratio(float):
    pass


def _one_at_a_time(records) -> bytes:
    return b"".join(messages.packb(r) for r in records)


def _packed(records) -> bytes:
    chunks = []
    packing.pack_into(records, chunks)
    assert len(chunks) == 1
    return bytes(chunks[0])


ints = st.one_of(st.integers(-2**63, 2**64 - 1),
                 st.sampled_from([0, 127, 128, 255, 256, 65535, 65536, 2**32 - 1, 2**32, -32, -33, -128, -129,
                                  -32768, -32769, -2**31, -2**31 - 1, 2**63, -2**63]))
plain = st.one_of(st.none(), st.booleans(), ints, st.floats(allow_nan=True, allow_infinity=True),
                  st.text(max_size=300), st.binary(max_size=300), st.frozensets(st.integers(0, 50), max_size=5),
                  st.builds(np.int64, st.integers(-2**63, 2**63 - 1)), st.builds(np.float64, st.floats()),
                  st.builds(np.bool_, st.booleans()), st.builds(Probe, st.integers(0, 2**40)))
values = st.recursive(plain, lambda inner: st.one_of(
    st.lists(inner, max_size=20).map(tuple), st.lists(inner, max_size=4),
    st.dictionaries(st.one_of(st.text(max_size=8), st.integers(-5, 5)), inner, max_size=4),
    st.builds(Box, inner, st.text(max_size=5))), max_leaves=30)
records = st.tuples(st.integers(0, 5), st.integers(0, 2**50), values, st.lists(values, max_size=6).map(tuple))


@settings(max_examples=300, deadline=None)
@given(st.lists(records, max_size=40))
def test_a_batch_is_the_records_packed_one_at_a_time(batch):
    assert _packed(batch) == _one_at_a_time(batch)


@pytest.mark.parametrize("odd", [Pair(1, 2), Size.SMALL, Ratio(1.5), bytearray(b"ab"), memoryview(b"ab"),
                                 np.float32(0.25), {(1, 2): 3}, {None: 1, 1.5: 2}])
def test_odd_values_pack_as_msgpack_packs_them(odd):
    """A tuple or float subclass, an enum: refused by ``packing._default``, packed by msgpack."""
    batch = [(0, 1, (odd,)), (1, 2, "x")]
    assert _packed(batch) == _one_at_a_time(batch)


def test_plain_records_never_reach_msgpack(monkeypatch):
    """The fast path is taken: with msgpack's packing broken, plain records and nested kinds still pack."""
    batch = [(0, 5, -1, 3, 2, 7, "fabtest.box", (Box(Probe(3), "n"), frozenset({2, 1}), 1.5, None))] * 3
    want = _one_at_a_time(batch)
    monkeypatch.setattr(messages, "packb", lambda _record: 1 / 0)
    assert _packed(batch) == want


@pytest.mark.parametrize("n", [15, 16, 65535, 65536, 65537])
def test_the_batchs_own_head_is_cut_off_at_every_length(n):
    batch = [(4, i, 1, 2) for i in range(n)]
    assert _packed(batch) == _one_at_a_time(batch)


@pytest.mark.parametrize("bad, error", [(object(), "cannot journal a value of type object"),
                                        (2**64, "cannot journal a value of type int")])
def test_a_record_that_cannot_be_journalled_raises_msgpacks_error_after_those_before_it(bad, error):
    batch = [(1, 1, 2), (1, 2, 3), (0, 3, (bad,)), (1, 4, 5)]
    chunks = []
    with pytest.raises(TypeError, match=error):
        packing.pack_into(batch, chunks)
    assert [bytes(c) for c in chunks] == [_one_at_a_time(batch[:2])]
