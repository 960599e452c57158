"""What the fabric inlines for speed, in one place, each piece marked with the plain code it equals.

A send on a plain network (the default link only, without loss or faults) is the
fabric's hottest path. ``make_send`` returns it as one closure, bound once per fabric, that writes out
four plain calls which would each cost a Python call per message:

- the latency draw: ``Latency.sample`` -> ``rand.draw`` -> ``rand.mix64`` (splitmix64);
- the entry's tie: ``ties.tie``;
- ``SenderFifo.clamp``'s first branch (nothing the sender sent is still in flight);
- ``EventQueue.push`` of an entry into an existing later bucket.

Every other send takes the plain path, ``Routing._send_routed`` (``Network.route``,
``EventQueue.push``). tests/test_fabric_fastpath.py checks on random networks and sends that both
paths give the same records, counts, queue and FIFO state.
"""

from __future__ import annotations

from .journal import SEND
from .network import DRAWS_PER_SEND
from .rand import GOLDEN, MASK, MIX1, MIX2
from .ties import TIE_MASK


def make_send(fabric):
    """The fabric's ``_send(actor, dst, msg)``: route ``actor``'s send number ``actor._seq`` now,
    queue it, and put its SEND record in the actor's outbox (see ``routing``). A sender's keys are read from
    the fabric's lists by its index, not from the actor: every kind of actor sends through here, and a
    slot read at a site that sees several classes is not specialized (docs/performance.md)."""
    queue = fabric._queue  # rebucketing keeps the object
    actors = fabric._actors
    keys = fabric._keys  # each sender's network stream key and tie key, by index (lists the fabric keeps)
    tie_keys = fabric._ties
    by_kind = fabric.sent_by_kind
    routed = fabric._send_routed

    def send(actor, dst: int, msg) -> None:
        if not 0 <= dst < len(actors):
            fabric._bad_dst(actor, dst, msg)
        net = fabric.network
        now = actor._now
        idx, seq = actor.id, actor._seq
        fixed = net.fixed
        if fixed is not None:  # plain, constant latency
            at = now + fixed
        else:
            jitter = net.jitter
            if jitter is None:  # not a plain network
                return routed(actor, dst, msg)
            lo, span, fifo = jitter  # plain, uniform latency
            # lo + (rand.draw(keys[idx], seq * DRAWS_PER_SEND) * span >> 64), inlined
            z = (keys[idx] + (seq * DRAWS_PER_SEND + 1) * GOLDEN) & MASK
            z = ((z ^ (z >> 30)) * MIX1) & MASK
            z = ((z ^ (z >> 27)) * MIX2) & MASK
            at = now + lo + ((z ^ (z >> 31)) * span >> 64)
            if fifo:
                clamp = actor._fifo  # the network's sender_fifo(actor.id)
                if now >= clamp.latest:  # SenderFifo.clamp's first branch, inlined
                    clamp.table = None
                    clamp.last_dst = dst
                    clamp.latest = at
                else:
                    at = clamp.clamp(now, dst, at)
        tag = msg._fedemu_tag
        actor._outbox.append((SEND, now, idx, seq, dst, at, tag, msg._fedemu_fields(msg)))
        by_kind[tag] = by_kind.get(tag, 0) + 1
        entry = (at, (at + 1) * tie_keys[idx] & TIE_MASK, idx, seq, 0, dst, msg)  # rank: RANK_MESSAGE + ties.tie
        b = at // queue.width  # EventQueue.push into an existing later bucket, inlined
        if b > queue.index:
            bucket = queue.buckets.get(b)
            if bucket is not None:
                bucket.append(entry)
                return
        queue.push(entry)

    return send
