"""Where a Megha GM looks for a worker: Algorithm 1 over its view of every LM's partitions, with a memo.

Algorithm 1 of the Megha 2023 paper (4.3) finds the suitable workers of one
partition (``PartitionView.suitable``). This module decides which partitions a GM asks, in which
order, and which it may skip without asking.

Search order (the papers leave it open; ``order``): ``rotate`` (ours) takes the GM's own (internal)
partition in every LM, round robin over LMs from the one after the last internal match; then the other
GMs' (external) partitions, round robin over LMs from the one after the last external match, and within
an LM in GM order after our own. ``fixed`` is the 2023 authors' simulator (meghanat/megha-constraint-aware
b503dbc, megha3.0/src/megha_sim/global_master/gm_constraints_rand.py: ``schedule_task`` l.221, LMs in
order; ``batched_repartition`` l.252-253, LM by LM, each LM's partitions in GM order, skipping its own):
internal partitions in LM order 0..n-1, then the external ones of LM 0, LM 1, ..., each in GM order,
every search from the start. A match in an external partition becomes a repartition request (Megha 2022
paper, IV-B4).

The empty-search memo: per task signature (constraints, demand), the value of each partition's
``gains`` counter when that partition last had no suitable worker. A partition whose counter has not
moved since is not searched again for the signature. A learnt value that gives a worker more of some
resource bumps its partition's counter; a value that only takes resources away (the worker got
busier) bumps nothing, nor do the GM's own allocations. So a partition found empty stays empty until
its counter moves: the memo never hides a match, it only saves searches. The same holds one level up
for a whole LM (``row_gains``) and for the whole search (``gain_total``): a signature found nowhere
costs O(1) until something anywhere changes.
"""

from __future__ import annotations

ORDERS = ("rotate", "fixed")  # the search orders (above); the first is the default


class PartitionSearch:
    """A GM's views of every (LM, partition), the free-worker total, the round-robin pointers and the memo.

    ``find`` is called once per match attempt and ``learn`` once per update message, so the
    per-partition loop stays inside one Python call (the GM's matching is most of Megha's run time).
    """

    def __init__(self, views, home: int, policy, order: str = "rotate") -> None:
        """``views[lm][p]``: the PartitionView of partition p (GM p's) in LM lm's cluster; ``home``: our p;
        ``order``: ``rotate`` or ``fixed`` (above)."""
        self.views = views
        self.home = home
        self.policy = policy
        self.rng = None  # the worker-choice stream, set by the owner once its actor has one
        self.num_lms = len(views)
        self.num_partitions = len(views[0])
        self.per_partition = views[0][0].n
        self.rr_internal = 0
        self.rr_external = 0
        if order not in ORDERS:
            raise ValueError(f"search order {order!r}; known: {', '.join(ORDERS)}")
        self.rotate = order == "rotate"  # fixed: the pointers stay at LM 0 and external partitions go in GM order
        self.external_order = [(home + j) % self.num_partitions for j in range(1, self.num_partitions)] \
            if self.rotate else [p for p in range(self.num_partitions) if p != home]
        self.total_free = sum(view.free_count for row in views for view in row)
        self.gains = [[0] * self.num_partitions for _ in range(self.num_lms)]
        self.row_gains = [0] * self.num_lms
        self.gain_total = 0
        self.memo: dict[tuple, list] = {}  # signature -> [gain_total, known row_gains, known gains]
        self.scanned = 0  # workers examined by ``find`` since the last ``take_scanned`` (a cost model's units)
        # with one resource, each view's live free values: ``learn`` passes over a value its view holds
        # already without calling it (most learnt values are: 91% of them on syn_1000)
        self.held = [[view.free_values for view in row] for row in views] if views[0][0].free_values is not None \
            else None

    def learn(self, lm: int, workers: tuple, frees: tuple) -> None:
        """Absolute free vectors of LM ``lm``'s workers (LM-wide indices); bump the memo's counters where
        a worker gained something."""
        per = self.per_partition
        views, gains = self.views[lm], self.gains[lm]
        grown = free_delta = 0
        if self.held is not None:  # one resource: compare with the live values, call ``update`` on a change
            held = self.held[lm]
            for w, free in zip(workers, frees):
                p, local = divmod(w, per)
                f, old = free[0], held[p][local]
                if f == old:
                    continue  # the view holds it already: no memo entry needs invalidating either
                free_delta += views[p].update(local, free)
                if f > old:
                    gains[p] += 1
                    grown += 1
        else:
            for w, free in zip(workers, frees):
                p, local = divmod(w, per)
                view = views[p]
                delta = view.update(local, free)
                if delta is None:
                    continue  # nothing new: no memo entry needs invalidating either
                free_delta += delta
                if view.grew:
                    gains[p] += 1
                    grown += 1
        self.total_free += free_delta
        if grown:
            self.row_gains[lm] += grown
            self.gain_total += grown

    def take_scanned(self) -> int:
        """Workers examined since the last call (each partition searched counts its workers)."""
        n, self.scanned = self.scanned, 0
        return n

    def allocate(self, lm: int, p: int, local: int, demand: tuple) -> int:
        """Take ``demand`` from a found worker (an optimistic launch); returns its LM-wide index."""
        view = self.views[lm][p]
        before = view.is_available(local)
        view.allocate(local, demand)
        if before and not view.is_available(local):
            self.total_free -= 1
        return p * self.per_partition + local

    def give_back(self, lm: int, worker: int, demand: tuple) -> None:
        """Return ``demand`` to worker ``worker`` (LM-wide) of LM ``lm``: an allocation undone (a gang that
        did not fit whole, or whose reservation failed), at most up to its capacity (a value learnt since
        may already count it free). Its partition's counters move, so the memo looks there again."""
        p, local = divmod(worker, self.per_partition)
        view = self.views[lm][p]
        free = view.free[local].tolist()
        cap = view.capacity[local].tolist()
        delta = view.update(local, [min(c, f + d) for f, d, c in zip(free, demand, cap)])
        self.total_free += delta or 0
        self.gains[lm][p] += 1
        self.row_gains[lm] += 1
        self.gain_total += 1

    def take_back(self, lm: int, worker: int, demand: tuple) -> None:
        """Take ``demand`` from worker ``worker`` of LM ``lm`` again, down to 0 at most: an allocation still
        under way that an absolute value just learnt did not count yet. Only takes away: the memo holds."""
        p, local = divmod(worker, self.per_partition)
        view = self.views[lm][p]
        free = view.free[local].tolist()
        self.total_free += view.update(local, [max(0, f - d) for f, d in zip(free, demand)]) or 0

    def find(self, signature: tuple):
        """(lm, partition, local) of a worker suitable for ``signature`` = (constraints, demand), or None:
        internal partitions first, then external ones, skipping what the memo knows to be empty.

        A partition with no worker free for the unit demand is skipped unasked, so the demand must
        cover the unit demand, or take nothing the unit demand needs (then every worker stays free
        for it): a run's tasks share one demand vector of whole numbers, so either holds."""
        if not self.total_free:
            return None  # no worker anywhere is free for the unit demand (an overloaded datacenter)
        memo = self.memo.get(signature)
        n_lm = self.num_lms
        if memo is None:
            memo = self.memo[signature] = [-1, [-1] * n_lm, [[-1] * self.num_partitions for _ in range(n_lm)]]
        elif memo[0] == self.gain_total:
            return None  # nothing changed anywhere since every partition was found empty
        constraints, demand = signature
        _, known_rows, known = memo
        gains, row_gains, views = self.gains, self.row_gains, self.views
        g = self.home
        start = self.rr_internal
        for k in range(n_lm):
            lm = (start + k) % n_lm
            if known_rows[lm] == row_gains[lm] or known[lm][g] == gains[lm][g]:
                continue
            view = views[lm][g]
            if view.free_count:
                cand = view.suitable(constraints, demand)
                self.scanned += view.n
                if len(cand):
                    if self.rotate:
                        self.rr_internal = (lm + 1) % n_lm
                    return lm, g, self.policy.choose(view, cand, self.rng, demand)
            known[lm][g] = gains[lm][g]
        start = self.rr_external
        for k in range(n_lm):
            lm = (start + k) % n_lm
            if known_rows[lm] == row_gains[lm]:
                continue
            row, known_row, gains_row = views[lm], known[lm], gains[lm]
            for p in self.external_order:
                if known_row[p] != gains_row[p]:
                    view = row[p]
                    if view.free_count:
                        cand = view.suitable(constraints, demand)
                        self.scanned += view.n
                        if len(cand):
                            if self.rotate:
                                self.rr_external = (lm + 1) % n_lm
                            return lm, p, self.policy.choose(view, cand, self.rng, demand)
                    known_row[p] = gains_row[p]
            known_rows[lm] = row_gains[lm]  # every partition of this LM is known empty for the signature
        memo[0] = self.gain_total
        return None
