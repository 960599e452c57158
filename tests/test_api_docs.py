"""docs/api.md's examples run: every ```python block of the page, in order, in one namespace (as a reader
would paste them into one notebook), from the repository's root (where the page's trace path leads)."""

from __future__ import annotations

import contextlib
import io
import os
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "api.md"


def _blocks() -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", PAGE.read_text(), flags=re.S | re.M)


def test_the_page_has_the_four_examples():
    assert len(_blocks()) == 4


def test_the_examples_run(monkeypatch):
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("MPLBACKEND", "Agg")
    # compare's runs in this process (processes=0 means one per CPU): a spawn pool would leave its resource
    # tracker running beside the suite, and cost a second to start
    monkeypatch.setattr(os, "cpu_count", lambda: 1)
    namespace: dict = {"__name__": "api_md"}
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        for i, block in enumerate(_blocks()):
            exec(compile(block, f"{PAGE}:block{i + 1}", "exec"), namespace)  # noqa: S102 - the page's own code
    text = printed.getvalue()
    assert "megha" in text and "pigeon" in text and "heartbeat" in text and "invalid launches in" in text
