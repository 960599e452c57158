"""Pigeon (2019 paper) and PigeonC: distributors, group masters (the master, its dispatch, its
recovery in failover, the election) and workers. ``plugin`` declares both schedulers."""
