"""``messages.lean``: a message's journal fields leave out its trailing fields at their defaults, exactly
as trimming the full tuple from the end would, and replay rebuilds the same message from them."""

from __future__ import annotations

import attrs
from hypothesis import given
from hypothesis import strategies as st

from fedemu.fabric.messages import lean, message


@lean
@message("test.lean3")
class Three:
    a: int
    b: int = 0
    c: tuple = ()
    d: int = -1


@lean
@message("test.lean1")
class One:
    a: int
    b: int = 7


def trimmed(msg) -> tuple:
    """The reference: every field, then trailing defaults dropped (never a required field)."""
    fields = attrs.fields(type(msg))
    out = [getattr(msg, f.name) for f in fields]
    while len(out) > 1 and fields[len(out) - 1].default is not attrs.NOTHING and \
            out[-1] == fields[len(out) - 1].default:
        out.pop()
    return tuple(out)


@given(st.integers(-3, 3), st.sampled_from([0, 1]), st.sampled_from([(), (1,)]), st.sampled_from([-1, 0, 5]))
def test_trailing_defaults_are_left_out_and_the_message_rebuilds(a, b, c, d):
    msg = Three(a, b, c, d)
    got = Three._fedemu_fields(msg)
    assert got == trimmed(msg)
    assert Three(*got) == msg


@given(st.integers(-3, 3), st.sampled_from([7, 8]))
def test_one_trailing_field(a, b):
    msg = One(a, b)
    assert One._fedemu_fields(msg) == trimmed(msg) and One(*One._fedemu_fields(msg)) == msg
