"""Where a Megha GM looks for a worker: Algorithm 1 over its view of every LM's partitions, with a memo.

Algorithm 1 of the Megha 2023 paper (4.3) finds the suitable workers of one
partition (``PartitionView.suitable``; read here as bits, ``suitable_bits``). This module decides which
partitions a GM asks, in which order, and which it may skip without asking.

Search order (the papers leave it open; ``order``): ``rotate`` (ours) takes the GM's own (internal)
partition in every LM, round robin over LMs from the one after the last internal match; then the other
GMs' (external) partitions, round robin over LMs from the one after the last external match, and within
an LM in GM order after our own. ``fixed`` is the 2023 authors' simulator (meghanat/megha-constraint-aware
b503dbc, megha3.0/src/megha_sim/global_master/gm_constraints_rand.py: ``schedule_task`` l.221, LMs in
order; ``batched_repartition`` l.252-253, LM by LM, each LM's partitions in GM order, skipping its own):
internal partitions in LM order 0..n-1, then the external ones of LM 0, LM 1, ..., each in GM order,
every search from the start. A match in an external partition becomes a repartition request (Megha 2022
paper, IV-B4).

The empty-search memo: per task signature (constraints, demand), the partitions that may hold a
suitable worker (``dirty``, a bit mask by partition id: a few words a signature): every partition at
first; one found with no suitable worker leaves the mask until it gains. A learnt value that gives a worker more of some resource is a gain of its partition; a
value that only takes resources away (the worker got busier) is none, nor are the GM's own allocations.
So a partition found empty stays empty until it gains: the memo never hides a match, it only saves
searches. Gains go to one log (partition ids); a signature's entry folds in the log's tail when it is
next searched, so a gain costs one append however many signatures wait, and a signature found nowhere
costs O(1) until something anywhere gains. A tail longer than the partitions are many (few partitions,
many gains: 25 partitions of 400 workers at paper scale) is folded partition by partition instead, from
when each last gained. A search visits only its dirty partitions, in the search
order: few of them are sorted by their place in it, many are picked from the whole order. A dirty
partition with no worker free for the unit demand leaves the mask unasked: only a gain brings it back.
A signature found nowhere is asked again, after a short tail of gains, only about the workers that
gained (``_refused_since``): the rest of each partition got no more of anything, so when none of those
fits, a search would find each gained partition empty, and the refusal is settled as it would settle it.
"""

from __future__ import annotations

from itertools import chain

from fedemu.policies.worker_choice import among

ORDERS = ("rotate", "fixed")  # the search orders (above); the first is the default
UNIT = "unit"  # ``_demand_kind`` of the unit demand (truthy, like a covering demand's True)


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
        self.among = None if policy is None else among(policy)  # its choice from candidates as bits
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
        n_p = self.num_partitions
        self.gain_total = 0  # gains so far (a gang's memo compares it)
        self.gain_log: list[int] = []  # partition ids (lm * num_partitions + p) that gained, oldest first
        self.gain_local: list[int] = []  # beside it: the local index of the worker that gained
        self.log_base = 0  # the number of the log's first gain (gains are numbered from 0; ``_fold`` moves it)
        self.memo: dict[tuple, list] = {}  # signature -> its entry (``_entry``): gains folded in, dirty partitions, ...
        # each signature's number (``key``), and by number the signature and its memo entry (None until searched):
        # a queue keyed by number hands ``find_key`` an int, which hashes at no cost, where a signature's nested
        # tuple is hashed afresh at every look-up (most offers are refusals: 1.4% of the instructions of the
        # issue-47 Megha case's first 1,000 jobs)
        self.keys: dict[tuple, int] = {}
        self.signatures: list[tuple] = []
        self._entries: list[list | None] = []
        self._internal = [lm * n_p + home for lm in range(self.num_lms)]  # our partition in LM 0, 1, ...
        self._external = [lm * n_p + p for lm in range(self.num_lms) for p in self.external_order]
        self._flat = [view for row in views for view in row]  # by partition id
        self._bit = [1 << q for q in range(len(self._flat))]  # a partition's bit in a dirty mask
        self.last_gain = [-1] * len(self._flat)  # by partition id: the number of its latest gain
        self._every = (1 << len(self._flat)) - 1
        self._slot = {p: i for i, p in enumerate(self.external_order)}  # an external partition's place in an LM
        self.sort_ratio = 8  # a search sorts its dirty partitions when they are under 1/8 of all (tests vary it)
        self.log_limit = 4 * len(self._flat) + 1024  # gains logged before ``_fold`` (tests vary it)
        self.tail_limit = len(self._flat)  # a longer tail is folded partition by partition (tests vary it)
        self._tail = (None, (), 0, ())  # ``_tail_of``'s last answer
        self._kinds: dict[tuple, object] = {}  # demand -> its ``_demand_kind``
        self.scanned = 0  # workers examined by ``find`` since the last ``take_scanned`` (a cost model's units)
        # with one resource, each view's live free values: ``learn`` passes over a value its view holds
        # already without calling it (most learnt values are: 91% of them on syn_1000)
        self.held = [[view.free_values for view in row] for row in views] if views[0][0].free_values is not None \
            else None

    def learn(self, lm: int, workers: tuple, frees: tuple) -> None:
        """Absolute free vectors of LM ``lm``'s workers (LM-wide indices); a worker that gained something
        is a gain of its partition (logged for the memo)."""
        per = self.per_partition
        views, log, last, locals_ = self.views[lm], self.gain_log, self.last_gain, self.gain_local
        base = lm * self.num_partitions
        number = self.log_base + len(log)  # the next gain's
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
                    log.append(base + p)
                    locals_.append(local)
                    last[base + p] = number + grown
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
                    log.append(base + p)
                    locals_.append(local)
                    last[base + p] = number + grown
                    grown += 1
        self.total_free += free_delta
        if grown:
            self.gain_total += grown
            if len(log) > self.log_limit:
                self._fold()

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
        may already count it free). It is a gain of its partition, so the memo looks there again."""
        p, local = divmod(worker, self.per_partition)
        view = self.views[lm][p]
        free = view.free[local].tolist()
        cap = view.capacity[local].tolist()
        delta = view.update(local, [min(c, f + d) for f, d, c in zip(free, demand, cap)])
        self.total_free += delta or 0
        q = lm * self.num_partitions + p
        self.last_gain[q] = self.log_base + len(self.gain_log)
        self.gain_log.append(q)
        self.gain_local.append(local)
        self.gain_total += 1

    def take_back(self, lm: int, worker: int, demand: tuple) -> None:
        """Take ``demand`` from worker ``worker`` of LM ``lm`` again, down to 0 at most: an allocation still
        under way that an absolute value just learnt did not count yet. Only takes away: the memo holds."""
        p, local = divmod(worker, self.per_partition)
        view = self.views[lm][p]
        free = view.free[local].tolist()
        self.total_free += view.update(local, [max(0, f - d) for f, d in zip(free, demand)]) or 0

    def key(self, signature: tuple) -> int:
        """The number of ``signature`` = (constraints, demand), given at its first sight (``find_key``)."""
        k = self.keys.get(signature)
        if k is None:
            k = self.keys[signature] = len(self.signatures)
            self.signatures.append(signature)
            self._entries.append(None)
        return k

    def find(self, signature: tuple):
        """(lm, partition, local) of a worker suitable for ``signature`` = (constraints, demand), or None:
        internal partitions first, then external ones, skipping what the memo knows to be empty.

        A partition with no worker free for the unit demand is skipped unasked, so the demand must
        cover the unit demand, or take nothing the unit demand needs (then every worker stays free
        for it): a run's tasks share one demand vector of whole numbers, so either holds."""
        return self.find_key(self.key(signature))

    def find_key(self, k: int):
        """``find`` for the signature numbered ``k`` (``key``)."""
        if not self.total_free:
            return None  # no worker anywhere is free for the unit demand (an overloaded datacenter)
        log = self.gain_log
        now = self.log_base + len(log)  # gains so far
        entry = self._entries[k]
        if entry is None:
            dirty = self._every
            signature = self.signatures[k]
            entry = self._entries[k] = self.memo[signature] = self._entry(signature, now)
        else:
            dirty = entry[1]
            seen = entry[0]
            if seen != now:
                if not dirty and entry[3] and now - seen <= self.tail_limit:
                    # found nowhere at ``seen``: is it refused again, judged by the workers gained since?
                    # (``_refused_since``, written out here: most of a busy pass's offers end here)
                    tail = self._tail
                    if tail[0] != (seen, now, self.total_free):
                        tail = self._tail = self._tail_of(seen - self.log_base)
                    if entry[3] is UNIT:  # a free gained worker having every constraint fits
                        need = entry[2]
                        for has in tail[3]:
                            if not need & ~has:
                                break
                        else:
                            self.scanned += tail[2]
                            entry[0] = now
                            return None
                    elif self._refused_since(entry, self.signatures[k], now, tail):
                        return None
                bit = self._bit
                if now - seen > self.tail_limit:  # a long tail: each partition, by when it last gained
                    for q, at in enumerate(self.last_gain):
                        if at >= seen:
                            dirty |= bit[q]
                else:
                    for q in log[seen - self.log_base:]:
                        dirty |= bit[q]
                entry[0] = now
            elif not dirty:
                return None  # nothing gained anywhere since every partition was found empty
        flat, bit = self._flat, self._bit
        n_lm, n_p = self.num_lms, self.num_partitions
        if self.sort_ratio * dirty.bit_count() < len(flat):  # few: sort those with a free worker by their place
            live = []
            rest = dirty
            while rest:
                low = rest & -rest
                rest ^= low
                q = low.bit_length() - 1
                if flat[q].free_count:
                    live.append(q)
                else:  # no worker free for the unit demand there: only a gain brings one back
                    dirty ^= low
            if len(live) > 1:
                ri, re, home, slot = self.rr_internal, self.rr_external, self.home, self._slot
                live.sort(key=lambda q: (q - ri * n_p) % len(flat) if q % n_p == home
                          else len(flat) + ((q // n_p - re) % n_lm) * n_p + slot[q % n_p])
        else:  # many: the whole order, rotated to the pointers, read lazily (the first match ends it)
            internal, external = self._internal, self._external
            ri, cut = self.rr_internal, self.rr_external * len(self.external_order)
            live = chain(internal[ri:], internal[:ri], external[cut:], external[:cut])
        constraints, demand = self.signatures[k]
        for q in live:
            if not dirty & bit[q]:
                continue  # found empty since it last gained
            view = flat[q]
            if view.free_count:
                cand = view.suitable_bits(constraints, demand)
                self.scanned += view.n
                if cand:
                    entry[1] = dirty
                    if self.rotate:
                        lm, p = divmod(q, n_p)
                        if p == self.home:
                            self.rr_internal = (lm + 1) % n_lm
                        else:
                            self.rr_external = (lm + 1) % n_lm
                    return q // n_p, q % n_p, self.among(view, cand, self.rng, demand)
            dirty ^= bit[q]
        entry[1] = dirty
        return None

    def _entry(self, signature: tuple, now: int) -> list:
        """A new memo entry: [gains folded in, dirty partitions (every one), the constraints as bits,
        the demand's kind (``_demand_kind``)]."""
        constraints, demand = signature
        kind = self._kinds.get(demand)
        if kind is None:
            kind = self._kinds[demand] = self._demand_kind(demand)
        return [now, self._every, self._flat[0].constraint_bits(constraints), kind]

    def _refused_since(self, entry: list, signature: tuple, now: int, tail: tuple) -> bool:
        """Whether a signature found nowhere at ``entry[0]`` is refused again now, judged by ``tail``
        (``_tail_of``: the workers that gained since and are free): the rest of each partition got no more
        of anything, so it is still unsuitable. When none of them fits, the refusal is settled as the
        search would settle it (each gained partition with a free worker asked and found empty, the memo
        entry moved to ``now``). ``find`` writes this out for the unit demand (a free gained worker having
        the signature's constraints fits); this is for another demand covering it."""
        constraints, demand = signature
        for view, free in tail[1]:
            if view.suitable_among(free, constraints, demand):
                return False
        self.scanned += tail[2]
        entry[0] = now
        return True

    def _demand_kind(self, demand: tuple):
        """UNIT for the unit demand, True for another that covers it, False for one that does not
        (a partition with no free worker is skipped unasked, yet such a demand may fit there)."""
        view = self._flat[0]
        if not view.covers_unit(demand):
            return False
        return UNIT if view.is_unit(demand) else True

    def _tail_of(self, start: int) -> tuple:
        """(key, per gained partition its view and those of its workers that gained from log position
        ``start`` on and are free for the unit demand now, as bits (partitions with none left out), the
        workers a search of the gained partitions examines, the distinct ``worker_constraints`` of those
        free workers). Valid while no gain is logged and ``total_free`` holds: between gains a worker only
        ever loses, and each loss of one free for the unit demand lowers ``total_free``, so the same key
        means the same free workers."""
        flat, log, locals_ = self._flat, self.gain_log, self.gain_local
        bits: dict[int, int] = {}
        for q, local in zip(log[start:], locals_[start:]):
            bits[q] = bits.get(q, 0) | 1 << local
        examined = sum(flat[q].n for q in bits if flat[q].free_count)
        key = (self.log_base + start, self.log_base + len(log), self.total_free)
        free = [(flat[q], b & flat[q].available_bits) for q, b in bits.items()]
        free = [(view, b) for view, b in free if b]
        has: dict[int, None] = {}
        # int_indices' loop over the set bits, written out: calling a helper per partition here cost 0.3% of
        # a Megha run's instructions (YH1_sub's first 200 jobs, cachegrind)
        for view, b in free:
            cons = view.worker_constraints
            while b:
                low = b & -b
                b ^= low
                has[cons[low.bit_length() - 1]] = None
        return key, free, examined, tuple(has)

    def _fold(self) -> None:
        """Fold the gain log into every signature's dirty partitions and empty it (keeps the log short):
        one pass makes each position's suffix (the partitions gained from there on), one OR a signature."""
        log, bit, base = self.gain_log, self._bit, self.log_base
        suffix = [0] * (len(log) + 1)
        for i in range(len(log) - 1, -1, -1):
            suffix[i] = suffix[i + 1] | bit[log[i]]
        now = base + len(log)
        for entry in self.memo.values():
            entry[1] |= suffix[entry[0] - base]
            entry[0] = now
        self.log_base = now
        log.clear()
        self.gain_local.clear()
