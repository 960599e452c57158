"""The whole-process table's tool (``tools.bench.paired``): ratios read from pairs, bad input in one line,
and, with the trace present, a round of real runs of two trees."""

import sys

import pytest

from fedemu.tools.bench import paired


def _row(r, case, cond, tree, engine, cpu, peak=100, digest="d1"):
    return (r, case, cond, tree, engine, cpu, peak, digest)


def test_ratios_are_read_in_pairs_of_the_same_round_and_condition():
    rows = [_row(1, "pigeon", "src", "base", "trio", 10.0, 200), _row(1, "pigeon", "src", "this", "trio", 8.0),
            _row(1, "pigeon", "src", "this", "direct", 6.0, 90),
            _row(2, "pigeon", "src", "base", "trio", 20.0), _row(2, "pigeon", "src", "this", "trio", 18.0, 120),
            _row(2, "pigeon", "src", "this", "direct", 10.0),
            _row(1, "pigeon", "cache", "base", "trio", 5.0), _row(1, "pigeon", "cache", "this", "trio", 4.5),
            _row(1, "pigeon", "cache", "this", "direct", 4.0)]
    got = paired.paired(rows)
    assert got[("pigeon", "trio")]["ratios"] == [0.8, 0.9, 0.9]  # 8/10, 18/20, 4.5/5: never 18/10
    assert got[("pigeon", "trio")]["median"] == 0.9
    assert got[("pigeon", "direct")]["ratios"] == [0.5, 0.6, 0.8]
    assert got[("pigeon", "peak_kib")] == {"base trio": 200, "this trio": 120, "this direct": 100}
    assert got[("pigeon", "digests")] == ["d1"]
    assert "digest d1" in paired.report(rows) and paired.differing(rows) == []
    rows.append(_row(3, "pigeon", "src", "this", "trio", 1.0, digest="d2"))  # no base run in its round: no ratio
    assert paired.paired(rows)[("pigeon", "trio")]["ratios"] == [0.8, 0.9, 0.9]
    assert "DIFFERS: d1, d2" in paired.report(rows)
    assert paired.differing(rows) == ["pigeon"]


@pytest.mark.parametrize("argv, says", [
    (["--base", "."], "not a fedemu checkout"),
    (["--base", str(paired.ROOT), "--cases", "hawk"], "--cases 'hawk': known: sparrow, pigeon, megha"),
    (["--base", str(paired.ROOT), "--trace", "/nonexistent/YH1_sub.tr"], "no such file"),
    (["--base", str(paired.ROOT), "--trace", __file__, "--rounds", "0"], "rounds at least 1"),
])
def test_bad_input_is_one_line_and_exit_2(argv, says, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert paired.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert says in err and "\n" not in err


def test_a_run_that_fails_or_overstays_stops_the_bench_with_its_command(tmp_path):
    with pytest.raises(RuntimeError, match="exited with 3"):
        paired.measure([sys.executable, "-c", "raise SystemExit(3)"], {}, tmp_path)
    with pytest.raises(RuntimeError, match="stopped after 0.5 s"):
        paired.measure([sys.executable, "-c", "import time; time.sleep(30)"], {}, tmp_path, limit_s=0.5)
    cpu, peak = paired.measure([sys.executable, "-c", "sum(range(10**6))"], {}, tmp_path)
    assert cpu > 0 and peak > 1000  # KiB: the child's own, not this process's


@pytest.mark.skipif(not paired.YH1.exists(), reason="../shared/data absent")
def test_a_round_runs_both_trees_and_agrees_on_the_digest(tmp_path, capsys):
    out = tmp_path / "rows.tsv"
    argv = ["--base", str(paired.ROOT), "--rounds", "1", "--cases", "pigeon", "--conditions", "src", "--jobs", "2",
            "--out", str(out)]
    assert paired.main(argv) == 0
    rows = [line.split("\t") for line in out.read_text().splitlines()]
    assert [(r[3], r[4]) for r in rows] == [("base", "trio"), ("this", "trio"), ("this", "direct")]
    assert all(float(r[5]) > 0 and int(r[6]) > 0 for r in rows)
    assert len({r[7] for r in rows}) == 1  # the same tree twice, on either engine: one digest
    printed = capsys.readouterr().out
    assert printed.count("\tpigeon\t") == 3 and f"digest {rows[0][7][:8]}" in printed


def test_a_run_killed_by_a_signal_is_not_said_to_overstay(tmp_path):
    with pytest.raises(RuntimeError, match="exited with -9"):
        paired.measure([sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"], {}, tmp_path)
