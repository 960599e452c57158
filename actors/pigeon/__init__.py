"""Pigeon (2019 paper) and PigeonC: distributors, group masters (dispatch, membership and elections,
failover) and workers. ``plugin`` declares both schedulers."""
