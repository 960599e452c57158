"""Succinct State Sharing's bitmap (Eagle 2016, 4.1): one bit per worker in cluster order, set while the long-job
scheduler has long work placed on it. Kept as a bytearray beside the long-job scheduler's view of waiting times
(``EagleWaitingView``), sent as bytes; bit p is bit p % 8 of byte p // 8."""

from __future__ import annotations

from fedemu.policies.least_waiting import WaitingView


def is_set(bitmap: bytes, p: int) -> bool:
    """Whether bit ``p`` is set (a bitmap too short to hold it: not set)."""
    i = p >> 3
    return i < len(bitmap) and bool(bitmap[i] >> (p & 7) & 1)


def set_positions(bitmap: bytes) -> set:
    """The positions whose bit is set."""
    out = set()
    for i, byte in enumerate(bitmap):
        if byte:
            base = i << 3
            out.update(base | j for j in range(8) if byte >> j & 1)
    return out


def clear_positions(bitmap: bytes, positions) -> list:
    """The ``positions`` whose bit is not set, in their order."""
    busy = set_positions(bitmap)
    return [p for p in positions if p not in busy]


class EagleWaitingView(WaitingView):
    """The long-job scheduler's view of waiting times, with the bitmap of its busy workers (load > 0)."""

    def __init__(self, size: int, rtt_us: int = 0) -> None:
        super().__init__(size, rtt_us)
        self.bits = bytearray((size + 7) >> 3)

    def changed(self, p: int) -> None:
        if self.load[p]:
            self.bits[p >> 3] |= 1 << (p & 7)
        else:
            self.bits[p >> 3] &= ~(1 << (p & 7)) & 0xFF
