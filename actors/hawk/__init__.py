"""Hawk (Delgado et al., USENIX ATC 2015): a hybrid scheduler. Long jobs go to one centralized scheduler that
places each task on the worker with the least estimated waiting time; short jobs to distributed schedulers
that batch-probe with late binding; a reserved partition runs short tasks only; idle workers steal short
tasks queued behind long ones. ``plugin`` declares it; Eagle (``actors/eagle``) extends it."""
