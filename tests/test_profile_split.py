"""The bench's profile split: each profiled function is counted once, in the part of the code it is in."""

import cProfile
import pstats

from fedemu.tools.bench import profile_split
from fedemu.tools.bench.profile_split import ROOT, layers, part_of, split


def test_parts_are_layers_units_packages_or_builtins():
    assert part_of(str(ROOT / "fabric" / "kernel.py")) == "fabric/kernel.py"
    assert part_of(str(ROOT / "model.py")) == "model.py"
    assert part_of(str(ROOT / ".venv" / "lib" / "python3.11" / "site-packages" / "trio" / "_core" / "_run.py")) == "trio"
    assert part_of("~") == "C builtins"
    assert part_of("<attrs generated init fedemu.x>") == "generated (attrs)"
    assert part_of("/usr/lib/python3.11/heapq.py") == "stdlib"


def test_split_accounts_for_all_profiled_time_once():
    from fedemu.tools.run.runner import execute

    prof = cProfile.Profile()
    prof.enable()
    execute("default", seed=1, overrides={"jobs": 5})
    prof.disable()
    stats = pstats.Stats(prof)
    parts = split(stats)
    total = sum(own for (_, _, _), (_, _, own, _, _) in stats.stats.items())
    assert abs(sum(p[1] for p in parts) - total) < 1e-9
    assert sum(p[2] for p in parts) == sum(v[1] for v in stats.stats.values())
    names = [p[0] for p in parts]
    assert len(names) == len(set(names)) and "fabric/kernel.py" in names
    assert [p[1] for p in parts] == sorted((p[1] for p in parts), reverse=True)
    by_layer = dict(layers(parts))
    assert abs(by_layer["fabric"] - sum(p[1] for p in parts if p[0].startswith("fabric/"))) < 1e-9
    assert profile_split.LAYERS[0] == "fabric"
