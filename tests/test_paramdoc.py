"""docs/parameters.md is generated from the parameter classes, and is current."""

from __future__ import annotations

from pathlib import Path

from fedemu.actors import registry
from fedemu.model import declared
from fedemu.scenarios import federation
from fedemu.tools.run import paramdoc

DOC = Path(__file__).resolve().parent.parent / "docs" / "parameters.md"


def test_docs_parameters_md_is_current():
    """Regenerate it with ``python -m fedemu.tools.run.paramdoc > docs/parameters.md``."""
    assert DOC.read_text() == paramdoc.markdown()


def test_every_key_of_every_scheduler_and_section_is_documented():
    text = paramdoc.markdown()
    keys = {p.name for p in federation.COMMON} | {p.name for s in registry.SCHEDULERS.values() for p in s.params}
    assert all(f"| `{k}` |" in text for k in keys)


def test_every_declared_type_is_its_defaults():
    """``--set`` text is read as the key's type (``tools.run.params``), which is what its default is."""
    classes = {cls for _, cls in paramdoc.SECTIONS} | {s.config for s in registry.SCHEDULERS.values()}
    for cls in classes:
        for p in declared(cls):
            assert p.type is type(p.default), p.name
