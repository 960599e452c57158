"""The cyclic garbage collector, paused while a run's objects are made: the fabric's run and the runner's
whole run (build to summary) hold this pause; both engines take it."""

from __future__ import annotations

import contextlib
import gc


@contextlib.contextmanager
def gc_paused():
    """No cyclic garbage collection inside: for the whole process, not just the fabric's objects.

    A run allocates millions of short-lived tuples and messages that reference counting frees; the
    collector would keep walking thousands of live actors, trio tasks and queue entries to find
    nothing. So what exists on entry is frozen (``gc.freeze``, no collection first) and collection
    is disabled; on exit everything is unfrozen (what the caller had frozen too) into the oldest
    generation, and collection is enabled again. What the run made and left alive (its actors
    and records) thus skips the young collections: the first of them would otherwise walk all of it
    (0.14 s after a whole-trace Pigeon run, 0.27 s after Sparrow at 10,000 workers). Cycles made inside
    are collected by the next full collection (``gc.collect()``, or Python's own), not during.

    Inside a pause already (the runner's around the fabric's), or with collection off by the caller's
    choice, it does nothing: what the inner part makes stays young, so a ``gc.collect()`` after it walks
    those objects and not the ones frozen by the outer pause (the runner lets a finished run go that way)."""
    if not gc.isenabled():
        yield
        return
    gc.freeze()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()  # what the run made, into the permanent generation (no walk) ...
        gc.unfreeze()  # ... and all of it into the oldest one
        gc.enable()
