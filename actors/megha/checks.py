"""Megha's end-of-run checks of its live actors (the plug-in's ``checks``): every acting LM holds each live
worker's true free capacity (``lm_matches_workers``), each cluster's workers and every GM follow one LM
(``one_active_lm``), and every GM's view equals the LMs' state but for the changes it may not have
heard yet (``views_converge``)."""

from __future__ import annotations

import numpy as np

from ..common.invariants import Violation
from ..common.protocol import RunTask, TaskFinished
from .global_manager import GlobalManager
from .local_manager import LocalManager
from .messages import Launch, StopTask, Stopped, WorkerStatus


def _live(fabric, kind) -> list:
    """The live actors of class ``kind``, in actor order."""
    out = []
    for idx in range(len(fabric.names)):
        actor = fabric.actor(idx)
        if isinstance(actor, kind):
            out.append(actor)
    return out


def _acting(fabric) -> dict:
    """Per cluster, the live LM that acts for it: the active replica of the latest epoch (a standby, or
    an old active that has not heard of a later epoch yet, does not)."""
    out = {}
    for lm in _live(fabric, LocalManager):
        if lm.active and (lm.lm not in out or lm.epoch > out[lm.lm].epoch):
            out[lm.lm] = lm
    return out


def _unheld(lm, w: int) -> list[int]:
    """LM ``lm``'s free vector of worker ``w`` with its gang holds there given back (workers know no holds)."""
    held = lm.gang.held(w) if lm.gang is not None else None
    return lm.free[w] if held is None else [f + h for f, h in zip(lm.free[w], held)]


# what may still change the LM's record of a worker or the worker itself, on its way between the two
_REPORTS = (TaskFinished, WorkerStatus, Stopped)  # worker -> LM
_ORDERS = (RunTask, StopTask)  # LM -> worker


def _under_way(fabric, lm, wid: int) -> bool:
    """Whether a report or an order is still in flight between LM ``lm`` and worker ``wid`` on a live
    connection (``Fabric.in_flight``): the run ended before it arrived. One lost with its connection is not."""
    return any(isinstance(m, _REPORTS) for _, _, m in fabric.in_flight(wid, lm.id, live=True)) or \
        any(isinstance(m, _ORDERS) for _, _, m in fabric.in_flight(lm.id, wid, live=True))


def lm_matches_workers(fabric) -> list[Violation]:
    """Every acting LM (not rebuilding) holds each live worker's true free vector, and has none of them
    down while it is up, unless that worker's recovery was under way when the run ended (runs end when the
    last job does): the LM still probes or asks it (a cut broke its ask, or the ask is on its way), its
    hand-back is still to come (and then the ask), or waits for the notice that its launches can no longer
    arrive, or the worker still registers. A difference is
    allowed only while a report or a launch between the two is really in flight on a live connection; a
    report lost for good is a violation."""
    out = []
    for lm in _acting(fabric).values():
        if lm.recovery.rebuilding:
            continue
        for w, wid in enumerate(lm.worker_ids):
            worker = fabric.actor(wid)
            if worker is None:
                continue
            rec = lm.recovery
            if w in rec.down:
                if w in rec.asking or w in rec.probing or w in rec.awaiting_cut or rec.hand_back_at.get(w, -1) >= fabric.now \
                        or not worker.registered or _under_way(fabric, lm, wid):
                    continue
                out.append(Violation("lm_matches_workers", lm.worker_names[w], fabric.now,
                                     f"{lm.name} has it down, but it is up"))
            elif tuple(free := _unheld(lm, w)) != tuple(worker.free) and not _under_way(fabric, lm, wid):
                out.append(Violation("lm_matches_workers", lm.worker_names[w], fabric.now,
                                     f"{lm.name} holds free {tuple(free)}, the worker has {tuple(worker.free)}"))
    return out


def one_active_lm(fabric) -> list[Violation]:
    """With standby LMs: each cluster's live workers follow one LM, the acting one (the active replica of
    the latest epoch), and every live GM follows it too; a replica that still believes it is active
    with an older epoch is fenced on its first launch or heartbeat. Without standbys it holds trivially."""
    out = []
    acting = _acting(fabric)
    for lm in _live(fabric, LocalManager):
        if lm.standby is None or lm.recovery.rebuilding or lm is not acting.get(lm.lm):
            continue
        for w, wid in enumerate(lm.worker_ids):
            worker = fabric.actor(wid)
            # (a restarted worker still asking to register will follow whichever replica answers it)
            registering = worker is not None and not worker.registered
            if worker is not None and worker.lm_id != lm.id and w not in lm.recovery.down and not registering:
                out.append(Violation("one_active_lm", lm.worker_names[w], fabric.now,
                                     f"follows {fabric.names[worker.lm_id]} (epoch {worker.epoch}), but {lm.name} "
                                     f"is the active LM of epoch {lm.epoch}"))
        for gm in _live(fabric, GlobalManager):
            if lm.lm in gm.recovery.rebuilding or lm.lm in gm.recovery.resyncing:
                continue  # it has asked both replicas for a snapshot: the active's answer decides
            # a GM that has not heard of the epoch follows once the LM's snapshot of it reaches it (if it
            # is lost with its connection, the GM is told and asks, above)
            if gm.lm_ids[lm.lm] != lm.id and (gm.recovery.lm_inc[lm.lm] >= lm.epoch or gm.gm not in lm.told):
                out.append(Violation("one_active_lm", gm.name, fabric.now,
                                     f"follows {fabric.names[gm.lm_ids[lm.lm]]}, but {lm.name} is the active LM "
                                     f"of epoch {lm.epoch}"))
    return out


def _launches_on_their_way(fabric) -> dict[tuple[int, int], set[int]]:
    """The worker of every launch still to be delivered, by (sender, receiver): one look at what is in flight
    for every GM and LM (``Fabric.in_flight`` scans the queue and every mailbox)."""
    out: dict[tuple[int, int], set[int]] = {}
    for src, dst, m in fabric.in_flight(live=True):
        if isinstance(m, Launch):
            out.setdefault((src, dst), set()).add(m.worker)
    return out


def _unheard(fabric, gm, c: int, lm, launches: dict) -> set[int]:
    """The workers of LM ``lm`` (cluster ``c``) whose latest change GM ``gm`` may not have heard yet
    (``views_converge``; ``launches``: ``_launches_on_their_way``)."""
    unsent = lm.change_log.unheard(gm.gm, gm.lm_upto[c] if gm.recovery.lm_inc[c] == lm.epoch else 0)
    # (and what its launches there change: not there yet, or the task's completion is on its way)
    unsent |= {f.worker for key, f in gm.inflight.items() if f.lm == c and key not in lm.tasks}
    unsent |= {t.worker for key, t in lm.tasks.items() if t.owner == gm.gm
               and ((f := gm.inflight.get(key)) is None or f.lm != c or f.worker != t.worker)}
    unsent |= launches.get((gm.id, lm.id), set())
    if gm.gang is not None:  # (a gang's placement, taken in the view, whose reserve is on its way there)
        unsent |= {w for f in gm.gang.flights.values() if c in f.waiting for _, at, w in f.placed if at == c}
    return unsent


def views_converge(fabric) -> list[Violation]:
    """Every live GM's view of every live LM equals the LM's state, but for the workers whose latest
    change that GM may not have heard yet: it came after the last heartbeat or snapshot the GM took
    (the next one is due, or on its way) and was not that GM's own; or that GM's launch there has not
    reached the LM yet (its view is ahead), or the task it launched there ended and the completion is
    on its way; or a gang it placed there waits for that LM's vote. A launch that GM no longer tracks (a
    second execution: the first one's completion, from another LM, ended the GM's flight) counts too: its
    launch still on its way there (``Fabric.in_flight``), or its task running there, whose completion will
    tell that GM the worker's free vector again. (Until then a free vector the LM sent before it saw that
    launch may have overwritten the launch's demand in the view.)"""
    out = []
    acting = _acting(fabric)
    truth = {c: np.array(lm.free, dtype=np.int64) for c, lm in acting.items()}  # each LM's, once
    launches = None  # what is in flight, looked at once if some view differs
    for gm in _live(fabric, GlobalManager):
        for c, lm_id in enumerate(gm.lm_ids):
            lm = fabric.actor(lm_id)
            asking = c in gm.recovery.rebuilding or c in gm.recovery.resyncing
            if lm is None or lm is not acting.get(c) or lm.recovery.rebuilding or asking:
                continue
            per = gm.search.per_partition
            differ = [p * per + local for p, view in enumerate(gm.search.views[c])
                      for local in np.nonzero((view.free != truth[c][p * per:p * per + view.n]).any(axis=1))[0].tolist()]
            if not differ:
                continue
            if launches is None:
                launches = _launches_on_their_way(fabric)
            unsent = _unheard(fabric, gm, c, lm, launches)
            for w in differ:
                if w not in unsent:
                    seen = gm.search.views[c][w // per].free[w % per]
                    out.append(Violation("views_converge", f"{gm.name} view of {lm.worker_names[w]}", fabric.now,
                                         f"{gm.name} sees free {tuple(int(x) for x in seen)}, {lm.name} "
                                         f"holds {tuple(lm.free[w])}"))
    return out
