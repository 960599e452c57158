"""The committed quick reports (docs/reproductions/*-quick) are what the code produces now: each claim's
number and verdict, run again from scratch. A change that moves a result fails here, and the report is
then written again (``fedemu reproduce PAPER --quick --out …``) and the figures docs/reproducing.md quotes checked."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from fedemu.tools.cli import main
from fedemu.tools.experiments import TRACES

DOCS = Path(__file__).resolve().parents[1] / "docs" / "reproductions"


def _key(v: dict) -> tuple:
    ours = v["ours"]
    if isinstance(ours, float) and math.isfinite(ours) and ours != 0:
        ours = float(f"{ours:.6g}")
    return v["id"], v["verdict"], ours


@pytest.mark.slow  # a golden reproduction: minutes per paper
@pytest.mark.parametrize("paper", ["pigeon-2019", "megha-2022"])
def test_the_quick_report_in_docs_is_what_the_code_produces(paper, tmp_path, capsys):
    if not (TRACES / "YH1_sub.tr").exists() or not (TRACES / "GOOG_subtrace.tr").exists():
        pytest.skip(f"the traces are absent from {TRACES}")
    assert main(["reproduce", paper, "--quick", "--jobs", "2", "--out", str(tmp_path / "r")]) == 0
    ours = json.loads((tmp_path / "r" / "verdicts.json").read_text())
    committed = json.loads((DOCS / f"{paper}-quick" / "verdicts.json").read_text())
    assert [_key(v) for v in ours] == [_key(v) for v in committed]
    assert all(v["verdict"] in ("reproduces", "same direction", "differs") for v in ours)  # each measured
