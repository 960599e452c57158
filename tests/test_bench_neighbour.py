"""The benchmark's noisy neighbour runs only inside its block and is gone after it."""

import os

from fedemu.tools.neighbour import neighbour


def _children() -> set[int]:
    me = os.getpid()
    found = set()
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open(f"/proc/{pid}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == me and fields[0] != "Z":
                found.add(int(pid))
    return found


def test_the_neighbour_lives_only_inside_its_block():
    before = _children()
    with neighbour(1):
        assert len(_children() - before) == 1
    assert _children() == before
    with neighbour(0):  # no neighbour asked for: nothing runs
        assert _children() == before
