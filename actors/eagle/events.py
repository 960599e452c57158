"""Eagle's protocol events (``fabric.log.emit``), beside Hawk's and the common ones."""

from fedemu.fabric.log import Event

REJECTED = Event("probe_rejected", "debug", "a node with long work rejected a short probe, with its bitmap; the "
                 "scheduler probes again (round: the rejected probe's)")
FALLBACK = Event("probe_fallback", "debug", "a short probe rejected in the last round went to the reserved "
                 "partition")

EVENTS = (REJECTED, FALLBACK)
