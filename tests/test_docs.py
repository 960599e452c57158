"""The documentation: the README is a front door of about 300 lines, its layout map names exactly the
modules there are, and every link in the README and in docs/ resolves (the file, and the heading an
anchor names)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").rglob("*.md"))
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)|!\[[^\]]*\]\(([^)\s]+)\)")
MAP_ROW = re.compile(r"^\| `([\w./]+/)` \| [^|]+ \| (.+) \|$")  # | `folder/` | what | module, module, ... |


def _slug(heading: str) -> str:
    """The anchor a code host gives a Markdown heading: lower case, punctuation dropped, spaces to dashes."""
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    return {_slug(m.group(1)) for m in re.finditer(r"^#+ (.+)$", path.read_text(), re.M)}


def _links(path: Path):
    text = re.sub(r"```.*?```", "", path.read_text(), flags=re.S)  # not inside code blocks
    for m in LINK.finditer(text):
        target = m.group(1) or m.group(2)
        if not re.match(r"[a-z]+:", target):  # not http:, mailto:
            yield target


@pytest.mark.parametrize("path", [README, *DOCS], ids=lambda p: str(p.relative_to(ROOT)))
def test_every_link_resolves(path):
    for target in _links(path):
        file, _, anchor = target.partition("#")
        dest = (path.parent / file).resolve() if file else path
        assert dest.exists(), f"{path.relative_to(ROOT)}: link to {target} names no file"
        if anchor and dest.suffix == ".md":
            assert anchor in _anchors(dest), f"{path.relative_to(ROOT)}: link to {target} names no heading"


def test_the_readme_is_a_front_door():
    assert len(README.read_text().splitlines()) <= 320


def _map() -> dict[str, set[str]]:
    """The README's layout map: folder -> the module names its row lists."""
    out = {}
    for line in README.read_text().splitlines():
        m = MAP_ROW.match(line)
        if m:
            out[m.group(1)] = {name.strip(" `") for name in m.group(2).split(",")}
    return out


def test_the_layout_map_names_every_module_and_only_those():
    mapped = _map()
    assert mapped, "the README has no layout map"
    for folder, names in mapped.items():
        here = {p.stem for p in (ROOT / folder).glob("*.py")} - {"__init__"}
        assert names == here, f"{folder}: the map lists {sorted(names - here)} that do not exist, " \
                              f"and misses {sorted(here - names)}"
    packages = {str(p.parent.relative_to(ROOT)) + "/" for p in ROOT.glob("*/**/__init__.py")
                if ".venv" not in p.parts and "tests" not in p.parts}
    assert packages <= set(mapped), f"folders missing from the map: {sorted(packages - set(mapped))}"


def test_the_checks_catch_a_dead_link_and_a_stale_map(tmp_path, monkeypatch):
    """A link to a missing file or heading, and a map row that names a module that is gone, are caught."""
    doc = tmp_path / "a.md"
    doc.write_text("# Title\n[ok](#title) [gone](missing.md) [bad anchor](#nope)\n```\n[in code](x.md)\n```\n")
    assert list(_links(doc)) == ["#title", "missing.md", "#nope"]
    assert _slug("Faults and recovery (`--faults`)") == "faults-and-recovery---faults"
    monkeypatch.setattr(f"{__name__}.README", tmp_path / "R.md")
    (tmp_path / "R.md").write_text("| `fabric/` | the fabric | kernel, gone |\n")
    assert _map() == {"fabric/": {"kernel", "gone"}}


FAMILIES = {"crash, restart": ("crash", "restart"), "partition, heal": ("partition", "heal"),
            "slow, restore": ("slow", "restore"), "loss": ("loss",)}
FAULT_ROW = re.compile(r"^\| `([\w-]+)` \|" + r" (yes|no) \|" * len(FAMILIES), re.M)


def test_the_readme_fault_table_is_what_the_plugins_declare():
    """The scheduler x fault-kind table says what each plug-in's ``survives`` says, for every scheduler."""
    from fedemu.actors.registry import SCHEDULERS

    table = {m.group(1): m.groups()[1:] for m in FAULT_ROW.finditer(README.read_text())}
    assert table == {s.name: tuple("yes" if set(kinds) <= set(s.survives) else "no" for kinds in FAMILIES.values())
                     for s in SCHEDULERS.values()}


PLAN_NAMED = re.compile(r"--faults ([\w./-]+\.(?:toml|json))|`(docs/[\w./-]+\.(?:toml|json))`")


def _plans_named() -> list[tuple[str, str]]:
    """(page, path) of every fault plan a page names by its path (``--faults docs/x.toml``, `docs/x.toml`)."""
    return sorted({(str(page.relative_to(ROOT)), m.group(1) or m.group(2))
                   for page in [README, *DOCS] if "reproductions" not in page.parts
                   for m in PLAN_NAMED.finditer(page.read_text())})


@pytest.mark.parametrize("page, plan", _plans_named(), ids=lambda x: str(x))
def test_every_plan_a_doc_names_is_shipped_and_reads(page, plan):
    """Issue 45: docs/faults.md ran `--faults gms.toml`, a plan the repository did not hold. Every plan a
    page names is a file of the repository, reads, and resolves against the default scenario's actors
    under some scheduler (a Pigeon plan names masters), with no event that would do nothing."""
    from fedemu.actors.registry import SCHEDULERS
    from fedemu.fabric.errors import ConfigError
    from fedemu.scenarios import fault_plan
    from fedemu.tools.search import strategies

    path = ROOT / plan
    assert path.is_file(), f"{page} names {plan}, which is not in the repository"
    loaded, why = fault_plan.load(path), {}
    for scheduler in SCHEDULERS:
        names = strategies.Example("default", 1, {"scheduler": scheduler}, loaded, scheduler).names
        try:
            fault_plan.check_no_ops([], loaded.placed(names, 1))
            return
        except ConfigError as e:
            why[scheduler] = str(e)
    raise AssertionError(f"{page} names {plan}, which no scheduler's run can take: {why}")


def test_the_docs_name_the_plans_they_ship():
    assert {plan for _, plan in _plans_named()} >= {"docs/failover-plan.toml", "docs/failover-plan-pigeon.toml",
                                                    "docs/all-gms-down-plan.toml", "docs/fault-plan-example.toml"}
