"""The py-spy split: each sampled stack counted once, in the phase and part its frames say."""

from fedemu.tools.bench import spy_split
from fedemu.tools.bench.spy_split import PARTS, part_of, split

ENTRY = "<module> (fedemu/__main__.py:5);main (fedemu/tools/cli.py:637);_execute (fedemu/tools/run/runner.py:358)"
RUN = ENTRY + ";Fabric.run_blocking (fedemu/fabric/kernel.py:240)"


def test_the_innermost_frame_names_the_part_of_the_run():
    assert part_of(RUN + ";run (trio/_core/_run.py:2532);unrolled_run (trio/_core/_run.py:2866)") == spy_split.TRIO
    assert part_of(RUN + ";run (fedemu/fabric/direct.py:24);_step (fedemu/fabric/direct.py:70)") == spy_split.DIRECT
    handler = RUN + ";Fabric._handle (fedemu/fabric/kernel.py:497);Master.on_Idle (fedemu/actors/pigeon/master.py:206)"
    assert part_of(handler) == spy_split.SCHEDULERS
    assert part_of(handler + ";send (fedemu/fabric/fastpath.py:40)") == spy_split.FABRIC
    assert part_of(handler + ";__init__ (<attrs generated methods fedemu.actors.pigeon.messages.Idle>:35)") \
        == spy_split.MESSAGES


def test_the_phase_comes_before_the_part():
    results = ENTRY.rsplit(";", 1)[0] + ";_results (fedemu/tools/run/runner.py:392);write_results (fedemu/tools/results/results.py:400)"
    assert part_of(results + ";write_tasks_csv (fedemu/tools/results/results.py:203)") == spy_split.RESULTS
    assert part_of(results + ";plot_cdfs (fedemu/tools/results/results.py:245);draw (matplotlib/figure.py:3262)") \
        == spy_split.PLOTS
    assert part_of(ENTRY + ";finish (fedemu/scenarios/run.py:128);check (fedemu/actors/common/invariants.py:40)") \
        == spy_split.CHECKS
    assert part_of(ENTRY.replace(":358", ":379")) == spy_split.LET_GO
    assert part_of(ENTRY + ";build_run (fedemu/tools/run/runner.py:183)") == spy_split.START
    assert part_of("<module> (fedemu/__main__.py:5);<module> (fedemu/actors/common/invariants.py:1)") == spy_split.START


def test_split_counts_every_sample_once(tmp_path, capsys):
    lines = [RUN + ";unrolled_run (trio/_core/_run.py:2866) 7\n", ENTRY + ";build_run (fedemu/tools/run/runner.py:183) 3\n", "\n"]
    counts = split(lines)
    assert list(counts) == list(PARTS) and sum(counts.values()) == 10
    assert counts[spy_split.TRIO] == 7 and counts[spy_split.START] == 3
    raw = tmp_path / "raw.txt"
    raw.write_text("".join(lines))
    assert spy_split.main([str(raw)]) == 0
    assert spy_split.main([str(tmp_path / "missing.txt")]) == 2
    assert spy_split.main([]) == 2
    raw.write_text(lines[0] + "not a stack\n")
    assert spy_split.main([str(raw)]) == 2
    assert "raw.txt:2: not a py-spy raw line" in capsys.readouterr().err


def test_an_editable_install_under_another_folder_name_splits_the_same():
    """py-spy names our files from the checkout's folder (``main/fabric/kernel.py``), not only ``fedemu/``."""
    stacks = [
        RUN + ";Fabric._handle (fedemu/fabric/kernel.py:497)",
        RUN + ";run (fedemu/fabric/direct.py:24);_step (fedemu/fabric/direct.py:70)",
        RUN + ";Fabric._handle (fedemu/fabric/kernel.py:497);Master.on_Idle (fedemu/actors/pigeon/master.py:206)",
        ENTRY + ";RunState.finish (fedemu/scenarios/run.py:128);check (fedemu/actors/common/invariants.py:40)",
        ENTRY.replace(":358", ":379"),
    ]
    expected = [spy_split.FABRIC, spy_split.DIRECT, spy_split.SCHEDULERS, spy_split.CHECKS, spy_split.LET_GO]
    for folder in ("fedemu/", "main/", "fedemu-2/"):
        assert [part_of(s.replace("fedemu/", folder)) for s in stacks] == expected
