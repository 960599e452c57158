"""The role shape (``actors/common/components.py``): a component reaches its core only through the core's ``CORE``.

Read from the source (nothing is run). In each component class, every use of the core (``self.core``, a
local name bound to it, ``lm = self.core``, or the constructor's first argument) is checked: an attribute it reads, calls or writes must be in
the core's ``CORE`` or the actor's own ``ACTOR``; the core itself may be passed on whole (to ``emit``, to a
``Retries``: they use the actor's API); ``getattr``/``setattr`` on it are not allowed (they would hide the
name). The other way, a core never writes its components' fields (it calls their methods; it may read).

To check another role, add its (core, components) to ``ROLES``.
"""

from __future__ import annotations

import ast
import importlib
import inspect
from pathlib import Path

import pytest

from fedemu.actors.common.components import ACTOR

ROOT = Path(__file__).resolve().parent.parent
MEGHA = "fedemu.actors.megha"
ROLES = {  # core "module:Class" -> {its attribute: component "module:Class"}
    f"{MEGHA}.local_manager:LocalManager": {
        "recovery": f"{MEGHA}.lm_recovery:LmRecovery",
        "users": f"{MEGHA}.lm_fairness:LmFairness",
        "standby": f"{MEGHA}.standby:Standby",
        "gang": f"{MEGHA}.gang:LmGang",
    },
    f"{MEGHA}.global_manager:GlobalManager": {
        "recovery": f"{MEGHA}.gm_recovery:GmRecovery",
        "users": f"{MEGHA}.gm_fairness:GmFairness",
        "gang": f"{MEGHA}.gang:GmGang",
        "waiting": f"{MEGHA}.gm_waiting:GmWaiting",
    },
    "fedemu.actors.pigeon.master:MasterCore": {
        "recovery": "fedemu.actors.pigeon.failover:MasterRecovery",
    },
    "fedemu.actors.pigeon.distributor:Distributor": {
        "recovery": "fedemu.actors.pigeon.group_watch:GroupWatch",
    },
}
MUTATORS = frozenset({"add", "append", "clear", "discard", "extend", "insert", "pop", "popitem", "remove",
                      "setdefault", "update"})


def _load(ref: str):
    module, name = ref.split(":")
    return getattr(importlib.import_module(module), name)


def _class_node(cls) -> ast.ClassDef:
    source = Path(inspect.getsourcefile(cls)).read_text()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ClassDef) and node.name == cls.__name__:
            return node
    raise LookupError(cls.__name__)


def _is_self_attr(node, attr: str) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == attr and isinstance(node.value, ast.Name) \
        and node.value.id == "self"


def _aliases(fn, attr: str) -> set[str]:
    """Local names bound to ``self.<attr>`` in ``fn`` (``gm = self.core``, ``a, gm = x, self.core``)."""
    out = set()
    for node in ast.walk(fn):
        if isinstance(node, ast.Assign):
            pairs = [(t, node.value) for t in node.targets]
            if isinstance(node.value, ast.Tuple):
                pairs = [(t, v) for target in node.targets if isinstance(target, ast.Tuple)
                         for t, v in zip(target.elts, node.value.elts)]
            out |= {t.id for t, v in pairs if isinstance(t, ast.Name) and _is_self_attr(v, attr)}
    return out


def _uses(fn, attr: str, given: bool = False):
    """(line, node, parent) for each use of ``self.<attr>`` or an alias of it in ``fn`` (``given``: a
    constructor's first argument is one too, the core a component is built with)."""
    names = _aliases(fn, attr)
    if given and fn.name == "__init__" and len(fn.args.args) > 1:
        names.add(fn.args.args[1].arg)
    parents = {child: node for node in ast.walk(fn) for child in ast.iter_child_nodes(node)}
    for node in ast.walk(fn):
        if _is_self_attr(node, attr) or (isinstance(node, ast.Name) and node.id in names
                                         and isinstance(node.ctx, ast.Load)):
            yield node.lineno, node, parents.get(node)


def component_violations(component: ast.ClassDef, allowed: frozenset, where: str) -> list[str]:
    """Where the component class reaches its core (``self.core``) past ``allowed``."""
    out = []
    for fn in ast.walk(component):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for line, node, parent in _uses(fn, "core", given=True):
            if isinstance(parent, ast.Assign) and parent.value is node:
                continue  # bound to a local name: its uses are checked
            if isinstance(parent, ast.Attribute) and parent.value is node:
                if parent.attr not in allowed:
                    out.append(f"{where}:{line}: uses the core's {parent.attr!r}, not in its CORE")
            elif isinstance(parent, ast.Call) and isinstance(parent.func, ast.Name) and \
                    parent.func.id in ("getattr", "setattr", "delattr", "vars"):
                out.append(f"{where}:{line}: reaches the core by {parent.func.id}()")
    return out


def core_violations(core: ast.ClassDef, components: dict, where: str) -> list[str]:
    """Where the core class writes a component's field (an assignment into it, or a mutating call on it)."""
    out = []
    for fn in ast.walk(core):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for attr in components:
            for line, node, parent in _uses(fn, attr):
                if not (isinstance(parent, ast.Attribute) and parent.value is node):
                    continue
                field = parent.attr
                grand = next((n for n in ast.walk(fn) for c in ast.iter_child_nodes(n) if c is parent), None)
                if isinstance(parent.ctx, ast.Store) or (isinstance(grand, ast.Subscript) and
                                                        isinstance(grand.ctx, ast.Store)):
                    out.append(f"{where}:{line}: writes its {attr} component's {field!r}")
                elif isinstance(grand, ast.Attribute) and grand.attr in MUTATORS:
                    out.append(f"{where}:{line}: changes its {attr} component's {field!r} ({grand.attr})")
    return out


def _pairs():
    for core_ref, components in ROLES.items():
        for attr, ref in components.items():
            yield core_ref, attr, ref


def used(component: ast.ClassDef) -> set[str]:
    """The core's attributes the component class reads, calls or writes (through ``self.core`` or an alias)."""
    out = set()
    for fn in ast.walk(component):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            out |= {parent.attr for _, node, parent in _uses(fn, "core", given=True)
                    if isinstance(parent, ast.Attribute) and parent.value is node}
    return out


@pytest.mark.parametrize("core_ref", list(ROLES), ids=lambda x: x.split(":")[-1])
def test_every_name_a_core_declares_is_used_by_a_component(core_ref):
    """``CORE`` is exactly what the components need: a name none of them uses is dead weight in the interface."""
    core = _load(core_ref)
    needed = set().union(*(used(_class_node(_load(ref))) for ref in ROLES[core_ref].values()))
    assert sorted(core.CORE - needed) == [], f"{core.__name__}.CORE names what no component uses"


@pytest.mark.parametrize("core_ref,attr,ref", list(_pairs()), ids=lambda x: x.split(":")[-1])
def test_a_component_uses_only_its_cores_declared_interface(core_ref, attr, ref):
    core, component = _load(core_ref), _load(ref)
    assert isinstance(core.CORE, frozenset) and core.CORE, f"{core.__name__} declares no CORE"
    where = f"{Path(inspect.getsourcefile(component)).relative_to(ROOT)}"
    assert component_violations(_class_node(component), core.CORE | ACTOR, where) == []


@pytest.mark.parametrize("core_ref", sorted(ROLES), ids=lambda x: x.split(":")[-1])
def test_a_core_never_writes_its_components_fields(core_ref):
    core = _load(core_ref)
    where = f"{Path(inspect.getsourcefile(core)).relative_to(ROOT)}"
    assert core_violations(_class_node(core), ROLES[core_ref], where) == []


@pytest.mark.parametrize("core_ref", sorted(ROLES), ids=lambda x: x.split(":")[-1])
def test_core_names_what_the_core_has(core_ref):
    """Every name in ``CORE`` is one the core really has (a method, or an attribute it or a base sets on
    itself): a stale entry would widen the interface for nothing."""
    core = _load(core_ref)
    has = {name for name in dir(core) if not name.startswith("__")}
    for cls in core.__mro__:
        if cls.__module__.startswith("fedemu."):
            has |= {t.attr for n in ast.walk(_class_node(cls)) for t in getattr(n, "targets", [getattr(n, "target", None)])
                    if _is_self_attr(t, getattr(t, "attr", None))}
    assert sorted(core.CORE - has) == []


def test_the_check_catches_a_component_reaching_past_core():
    """A planted component that uses an undeclared name directly, through an alias, or by getattr, and a
    planted core that writes its component's field, are each reported; declared uses are not."""
    component = ast.parse(
        "class C:\n"
        "    def __init__(self, core):\n"
        "        self.core = core\n"
        "        self.n = len(core.unlisted)\n"
        "    def ok(self):\n"
        "        self.core.send(1, 2)\n"
        "        x = self.core.tasks\n"
        "        emit(self.core, 'E')\n"
        "    def bad(self):\n"
        "        self.core.secret += 1\n"
        "        gm, n = self.core, 0\n"
        "        gm.hidden()\n"
        "        getattr(self.core, 'tasks')\n").body[0]
    assert used(component) == {"unlisted", "send", "tasks", "secret", "hidden"}  # every name, declared or not
    found = component_violations(component, frozenset({"tasks"}) | ACTOR, "c.py")
    assert sorted(found) == ["c.py:10: uses the core's 'secret', not in its CORE",
                             "c.py:12: uses the core's 'hidden', not in its CORE",
                             "c.py:13: reaches the core by getattr()",
                             "c.py:4: uses the core's 'unlisted', not in its CORE"]
    core = ast.parse(
        "class K:\n"
        "    def ok(self):\n"
        "        self.recovery.refresh(1)\n"
        "        return 3 in self.recovery.down\n"
        "    def bad(self):\n"
        "        r = self.recovery\n"
        "        r.resyncing.add(1)\n"
        "        self.recovery.asks[2] = 0\n"
        "        self.recovery.started = 5\n").body[0]
    assert sorted(core_violations(core, {"recovery": None}, "k.py")) == [
        "k.py:7: changes its recovery component's 'resyncing' (add)",
        "k.py:8: writes its recovery component's 'asks'",
        "k.py:9: writes its recovery component's 'started'"]
