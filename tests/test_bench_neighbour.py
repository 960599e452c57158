"""The benchmark's noisy neighbour runs only inside its block and is gone after it."""

import os

from fedemu.tools.bench.neighbour import neighbour


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


# ---- the bench's guards (issue 45) ---------------------------------------------------------------------

import time  # noqa: E402

import pytest  # noqa: E402

from fedemu.tools.bench import bench_fabric, neighbour as neighbour_mod  # noqa: E402
from fedemu.tools.cli import main  # noqa: E402

SMALL = ["bench", "fabric", "--sizes", "2", "--messages", "10", "--repeat", "1"]


@pytest.fixture
def no_bench(monkeypatch):
    """bench_fabric.run replaced by a spy: a refused bench must never start."""
    ran = []
    monkeypatch.setattr(bench_fabric, "run", lambda **kw: ran.append(kw))
    return ran


@pytest.mark.parametrize("argv, says", [
    (["--sizes", "100000000000"], "argument --sizes: '100000000000' is not a list of actor counts from 2 to 1,000,000"),
    (["--neighbour", "99999999"], "argument --neighbour: expected a whole number from 0 to 4096"),
    (["--messages", "100000000000"], "argument --messages: expected a whole number from 1 to 10000000"),
    (["--repeat", "100000"], "argument --repeat: expected a whole number from 1 to 100"),
])
def test_bench_sizes_beyond_their_bound_are_one_line_exit_2(capsys, no_bench, argv, says):
    """Finding: --sizes 100000000000 grew to 1.7 GB in 15 s; --neighbour 99999999 was taken as given."""
    code = main(["bench", "fabric", *argv])
    out, err = capsys.readouterr()
    assert code == 2 and err.count("\n") == 1 and says in err, err
    assert out == "" and no_bench == []


def test_bench_sizes_beyond_this_machines_memory_are_refused(capsys, no_bench, monkeypatch):
    from fedemu.scenarios import preflight

    monkeypatch.setattr(preflight, "machine_memory", lambda: 1 << 30)
    code = main(["bench", "fabric", "--sizes", "1000000"])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("fedemu: error: bench fabric --sizes 1,000,000 would need about 3.8 GiB; "
                                        "this machine allows 0.8 GiB") and err.count("\n") == 1, err
    assert no_bench == []


@pytest.mark.parametrize("option", [["--sizes", "5"], ["--messages", "5"], ["--neighbour", "3"]])
def test_a_fabric_only_option_given_to_another_bench_is_refused(capsys, option):
    code = main(["bench", "megha", *option, "--case", "yh1-1k"])
    err = capsys.readouterr().err
    assert code == 2 and err == f"fedemu: error: {option[0]} is for bench fabric only; bench megha runs whole scenarios\n"


def test_a_neighbour_that_dies_at_once_fails_the_bench_and_prints_no_figures(capsys, no_bench, monkeypatch):
    """Finding: --neighbour 99999999 printed figures "with a neighbour process" that had died at once."""
    monkeypatch.setattr(neighbour_mod, "_LOOP", "import sys\nsys.exit('no room for {n} numbers')")
    before = _children()  # (a process an earlier test of this worker left, a resource tracker, is not ours)
    code = main([*SMALL, "--neighbour", "1"])
    out, err = capsys.readouterr()
    assert code == 1 and err == ("fedemu: failed: the neighbour process (1 MiB) ended before it was ready (exit "
                                 "status 1: no room for 131072 numbers); no figures are given as measured beside it\n")
    assert "with a neighbour" not in out and no_bench == []
    assert _children() == before


def test_a_neighbour_that_dies_during_the_bench_fails_it(capsys, monkeypatch):
    monkeypatch.setattr(neighbour_mod, "_LOOP", "print('ready', flush=True)")  # ready, then gone
    before = _children()

    def wait_for_the_neighbour_to_end(**kw):
        deadline = time.monotonic() + 30
        while _children() - before and time.monotonic() < deadline:  # (a zombie has ended: not listed)
            time.sleep(0.01)

    monkeypatch.setattr(bench_fabric, "run", wait_for_the_neighbour_to_end)
    code = main([*SMALL, "--neighbour", "1"])
    err = capsys.readouterr().err
    assert code == 1 and err.startswith("fedemu: failed: the neighbour process (1 MiB) ended during the bench "
                                        "(exit status 0)"), err
    assert _children() == before

