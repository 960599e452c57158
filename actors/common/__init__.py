"""What every scheduler shares: the front end, the submitter, the worker base, the common messages, the
end-of-run invariants and the deadline timer. Nothing here names a scheduler."""
