"""Megha (2022/2023 papers) and the 2022 paper's centralized baseline: GMs, LMs, workers, standby LMs,
global fairness and gang scheduling. ``plugin`` declares both schedulers."""
