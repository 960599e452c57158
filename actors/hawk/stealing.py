"""Hawk's work stealing: which reservations a victim gives an idle node (the Eagle authors' simulator, its
"ATC" strategy, the one the Hawk paper used).

The victim's queue, front to back: unless it runs a long task, the short reservations at its front are not
blocked and stay; then come long ones; the short reservations right behind those are the ones stolen, up to
``limit`` and stopping at the next long one. A victim whose queue holds no short work behind long work gives
nothing. Only reservations the thief can run (its constraints and capacity) are given; the others keep their
place.
"""

from __future__ import annotations


def stealable(longs: list[bool], running_long: bool, limit: int) -> list[int]:
    """Positions of the queue (``longs[i]``: whether entry i is long) that a thief may take, ascending."""
    i, n = 0, len(longs)
    if not running_long:
        while i < n and not longs[i]:
            i += 1
    while i < n and longs[i]:
        i += 1
    out = []
    while i < n and not longs[i] and len(out) < limit:
        out.append(i)
        i += 1
    return out


def runs_on(constraints: tuple, demand: tuple, provides: tuple, capacity: tuple) -> bool:
    """Whether a machine providing ``provides`` with ``capacity`` can run a task of ``constraints`` and
    ``demand``."""
    return all(c in provides for c in constraints) and len(demand) <= len(capacity) and \
        all(d <= c for d, c in zip(demand, capacity))
