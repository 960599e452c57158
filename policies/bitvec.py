"""Packed bit vectors (bit i = bit i % 64 of uint64 word i // 64; bits past n stay zero).

Word-level ANDs make Algorithm 1 of the Megha 2023 paper cost
O(constraints * n / 64) (its Eq. 4). The same bits
also travel as Python ints (bit i = ``1 << i``; CPython ANDs them digit by digit): on the small
vectors of a partition, one numpy call costs more than the whole AND, so the hot set operations
(availability, cached constraint masks) use ints and convert with ``to_int`` / ``int_indices``.
"""

from __future__ import annotations

import numpy as np

WORD_BITS = 64
_DTYPE = np.dtype(np.uint64)
_LE_WORDS = np.dtype("<u8")
_BIT = np.array([1 << b for b in range(WORD_BITS)], dtype=np.uint64)
_NOT_BIT = ~_BIT
_EMPTY = np.empty(0, dtype=np.intp)


def num_words(n: int) -> int:
    """Words needed to hold n bits."""
    return (n + WORD_BITS - 1) // WORD_BITS


def make(n: int) -> np.ndarray:
    """An all-zero vector of n bits."""
    if n < 0:
        raise ValueError(f"bit vector size must be >= 0, got {n}")
    return np.zeros(num_words(n), dtype=_DTYPE)


def full(n: int) -> np.ndarray:
    """An n-bit vector with every bit set (the tail of the last word stays clear)."""
    v = np.full(num_words(n), np.iinfo(np.uint64).max, dtype=_DTYPE)
    tail = n % WORD_BITS
    if tail:
        v[-1] = np.uint64((1 << tail) - 1)
    return v


def set_bit(v: np.ndarray, i: int) -> None:
    """Set bit i in place."""
    v[i >> 6] |= _BIT[i & 63]


def clear_bit(v: np.ndarray, i: int) -> None:
    """Clear bit i in place."""
    v[i >> 6] &= _NOT_BIT[i & 63]


def test_bit(v: np.ndarray, i: int) -> bool:
    """Whether bit i is set."""
    return bool(v[i >> 6] & _BIT[i & 63])


def from_indices(n: int, idx) -> np.ndarray:
    """An n-bit vector with exactly the bits in ``idx`` set (duplicates allowed)."""
    idx = np.asarray(idx, dtype=np.int64).reshape(-1)
    v = make(n)
    if idx.size:
        if idx.min() < 0 or idx.max() >= n:
            raise ValueError(f"bit index out of range 0..{n - 1}: {idx.min()}..{idx.max()}")
        np.bitwise_or.at(v, idx >> 6, _BIT[idx & 63])
    return v


def and_all(vectors) -> np.ndarray:
    """A new vector: the AND of one or more equal-length vectors."""
    vectors = list(vectors)
    if not vectors:
        raise ValueError("and_all needs at least one vector")
    out = vectors[0].copy()
    for v in vectors[1:]:
        np.bitwise_and(out, v, out=out)
    return out


def indices(v: np.ndarray) -> np.ndarray:
    """The set bits as an ascending intp array (sparse vectors unpack only their non-zero words)."""
    nz = np.flatnonzero(v)
    if nz.size == 0:
        return _EMPTY
    if 2 * nz.size >= v.size:
        everything = v.astype(_LE_WORDS, copy=False).view(np.uint8)
        return np.flatnonzero(np.unpackbits(everything, bitorder="little"))
    words = v[nz].astype(_LE_WORDS, copy=False).view(np.uint8)
    pos = np.flatnonzero(np.unpackbits(words, bitorder="little"))
    return (nz[pos >> 6] << 6) | (pos & 63)


def nth_set_bit(x: int, k: int) -> int:
    """The index of set bit number ``k`` (from 0, lowest first) of the int ``x``: ``int_indices(x)[k]``
    without unpacking (halving the range by bit counts, then clearing the lowest bits)."""
    if not 0 <= k < x.bit_count():
        raise IndexError(f"bit number {k} of an int with {x.bit_count()} set bits")
    base = 0
    width = x.bit_length()
    while width > 16:
        half = width >> 1
        low = x & ((1 << half) - 1)
        count = low.bit_count()
        if k < count:
            x = low
            width = half
        else:
            k -= count
            x >>= half
            base += half
            width -= half
    while k:
        x &= x - 1
        k -= 1
    return base + (x & -x).bit_length() - 1


def to_int(v: np.ndarray) -> int:
    """The vector as a Python int (bit i of the vector = ``1 << i``)."""
    return int.from_bytes(v.astype(_LE_WORDS, copy=False).tobytes(), "little")


def from_int(n: int, x: int) -> np.ndarray:
    """The n-bit vector holding the bits of int ``x`` (which must be below ``1 << n``)."""
    v = make(n)
    if x:
        v[:] = np.frombuffer(x.to_bytes(8 * v.size, "little"), dtype=_LE_WORDS)
    return v


_SPARSE = 8  # up to this many set bits, peeling them off in Python beats unpacking with numpy


def int_indices(x: int) -> np.ndarray:
    """The set bits of a non-negative int as an ascending intp array."""
    if x.bit_count() <= _SPARSE:
        out = []
        while x:
            low = x & -x
            out.append(low.bit_length() - 1)
            x ^= low
        return np.array(out, dtype=np.intp)
    raw = np.frombuffer(x.to_bytes((x.bit_length() + 7) >> 3, "little"), dtype=np.uint8)
    return np.flatnonzero(np.unpackbits(raw, bitorder="little"))


if hasattr(np, "bitwise_count"):

    def popcount(v: np.ndarray) -> int:
        """The number of set bits."""
        return int(np.bitwise_count(v).sum())

else:  # numpy < 2.0

    def popcount(v: np.ndarray) -> int:
        """The number of set bits."""
        return int(np.unpackbits(v.astype(_LE_WORDS, copy=False).view(np.uint8)).sum())


def any(v: np.ndarray) -> bool:  # noqa: A001 - the module namespaces it: bitvec.any(v)
    """Whether any bit is set."""
    return bool(v.any())
