"""Eagle's long-job scheduler: Hawk's (``actors/hawk/long_scheduler``, least waiting time) that keeps the bitmap of
the workers with long work beside its view (``bitmap.EagleWaitingView``) and piggybacks it on every long task's
reservation (Eagle 2016, 4.1): the nodes pass it on with their rejections. It goes with its memory when it
crashes; the restarted one rebuilds it with the view (``LoadAsk``)."""

from __future__ import annotations

from ..hawk.long_scheduler import LongScheduler
from .bitmap import EagleWaitingView
from .messages import Probe
from .scheduler import EagleScheduler


class EagleLongScheduler(LongScheduler, EagleScheduler):
    def waiting_view(self, size: int, rtt_us: int) -> EagleWaitingView:
        return EagleWaitingView(size, rtt_us)

    def probe_message(self, state, g: int, key: tuple, round: int = 1):
        if not state.long:
            return super().probe_message(state, g, key, round)
        job = state.job
        return Probe(job.job_id, g, job.demand, key[0], state.estimate_us, True, 0,
                     state.unbound() * state.estimate_us, bytes(self.waits.bits), self.now)
