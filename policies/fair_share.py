"""Megha's global fairness decisions (Megha 2022, IV-C and Algorithm 2), as pure
functions over a GM's (possibly stale) view of what each user consumes. The protocol around them (user
queues, preemption requests verified by the LM, workers stopping tasks) is the GM's and LM's.

Definitions (our reading where the paper is silent, written down here):
- A user's **share** is a fraction of the datacenter's total capacity; ``--set shares=10,25,15,50`` are
  percentages, each > 0 and summing to at most 100 (not normalised: what is left over is nobody's).
- **Share consumed**: the fraction of total capacity the user's running tasks hold, in their dominant
  resource (the largest of demand / total over the resources; with one resource, slots / slots).
- Algorithm 2, ``get_Preempt_Tasks``: a requester at or over its share gets nothing (its task goes back
  to its queue). Otherwise the users in violation (consuming more than their share) are tried in
  decreasing order of violation, ties by user number. We add two guards the pseudo-code leaves out,
  so preemption cannot create the unfairness it corrects: the requester must stay within its share
  with the new task, and a victim must stay at or above its share once its tasks are preempted.
- On one worker, the victims are the fewest tasks of the chosen user whose preemption, with what is free
  there, makes room for the demand (then the least capacity freed, then the lowest task keys).
"""

from __future__ import annotations

from itertools import combinations

import attrs

from fedemu.fabric.errors import ConfigError


@attrs.frozen
class Shares:
    """Each user's share of the datacenter, as a fraction (user ``u`` is ``fractions[u]``)."""

    fractions: tuple[float, ...]

    @classmethod
    def parse(cls, text: str, users: int) -> Shares:
        """``10,25,15,50`` (percent) for ``users`` users; empty text: equal shares summing to 100."""
        if users < 1:
            raise ConfigError(f"parameter 'users' is {users!r}; expected a whole number of at least 1")
        if not str(text).strip():
            return cls((1.0 / users,) * users)
        try:
            values = tuple(float(x) for x in str(text).split(","))
        except ValueError:
            raise ConfigError(f"parameter 'shares' is {text!r}; expected percentages separated by commas, "
                              "e.g. 10,25,15,50") from None
        if len(values) != users:
            raise ConfigError(f"parameter 'shares' is {text!r}: {len(values)} shares for {users} users")
        if any(not (v > 0) or v != v or v == float("inf") for v in values):
            raise ConfigError(f"parameter 'shares' is {text!r}; every share must be a percentage above 0")
        if sum(values) > 100 + 1e-9:
            raise ConfigError(f"parameter 'shares' is {text!r}: they sum to {sum(values):g}%, more than 100")
        return cls(tuple(v / 100 for v in values))

    def __len__(self) -> int:
        return len(self.fractions)


def dominant(units: tuple, total: tuple) -> float:
    """The fraction of ``total`` that ``units`` hold in their dominant resource."""
    return max((u / t for u, t in zip(units, total) if t > 0), default=0.0)


def consumed(held: list[tuple], total: tuple) -> list[float]:
    """Each user's share consumed, from the units its running tasks hold (``held[u]``, per resource)."""
    return [dominant(h, total) for h in held]


def preempt_order(requester: int, use: list[float], shares: Shares, demand_share: float) -> tuple[int, ...]:
    """Algorithm 2's user loop: the users whose tasks may be preempted for ``requester``, most in
    violation first; () when the requester is at or over its share, or would exceed it with the task
    (``demand_share``: the task's dominant share of the datacenter)."""
    mine = shares.fractions[requester]
    if use[requester] >= mine or use[requester] + demand_share > mine + 1e-12:
        return ()
    over = [(use[u] - shares.fractions[u], u) for u in range(len(shares)) if u != requester
            and use[u] - demand_share >= shares.fractions[u] - 1e-12]
    return tuple(u for _, u in sorted(over, key=lambda vu: (-vu[0], vu[1])))


def choose_victims(running: list[tuple], free: tuple, demand: tuple) -> tuple | None:
    """Of ``running`` ((key, demand) of the chosen user's tasks on one worker), the fewest whose
    preemption, with ``free``, holds ``demand``; then the least freed, then the lowest keys. None: no set
    does (this worker cannot make room). () when ``free`` already holds it."""
    if all(f >= d for f, d in zip(free, demand)):
        return ()
    ranked = sorted(running)
    everything = [f + sum(t[1][r] for t in ranked) for r, f in enumerate(free)]
    if not all(x >= d for x, d in zip(everything, demand)):
        return None  # not even every task of the user here would make room
    for size in range(1, len(ranked) + 1):
        best = None
        for combo in combinations(ranked, size):
            room = [f + sum(t[1][r] for t in combo) for r, f in enumerate(free)]
            if all(x >= d for x, d in zip(room, demand)):
                cost = (sum(sum(t[1]) for t in combo), [t[0] for t in combo])
                if best is None or cost < best[0]:
                    best = (cost, tuple(t[0] for t in combo))
        if best is not None:
            return best[1]
    return None
