"""docs/parameters.md, generated from the parameter classes (``model.param`` fields): every ``--set`` key
of the federation scenarios (the run, the machines, each workload, the network, failure processes) and
of each scheduler, with its type, default and meaning. ``tests/test_paramdoc.py`` checks that the file
is current; write it again with ``python -m fedemu.tools.run.paramdoc > docs/parameters.md``.
"""

from __future__ import annotations

from fedemu.actors import registry
from fedemu.model import declared
from fedemu.scenarios import run_params

HEAD = """# Parameters

Every `--set KEY=VALUE` key of the federation scenarios (`default`, `failover`, `fairness`,
`heterogeneous`, and a scenario file that imports `scenarios.federation`), generated from the parameter
classes that declare them (`python -m fedemu.tools.run.paramdoc > docs/parameters.md`; a test checks that
this file is current). `fedemu run --help-params --set scheduler=NAME` lists the keys that apply to one
run, with the values it would use.

A value is read as the key's type: `true`/`false`, a whole number, a number (`inf` where the rule allows
it), or text. A key that does not apply to the run (another scheduler's, another workload's) is refused
in one line, as is a value its rule refuses.
"""

SECTIONS = (
    ("The run", run_params.RunParams), ("The machines", run_params.ClusterParams),
    ("The workload", run_params.WorkloadParams), ("workload=poisson", run_params.PoissonParams),
    ("workload=syn_N", run_params.SynParams), ("workload=trace", run_params.TraceParams),
    ("The network", run_params.NetworkParams), ("Failure processes", run_params.FailureParams),
)
TYPES = {bool: "bool", int: "whole number", float: "number", str: "text"}


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _doc(cls) -> str:
    """A class's docstring's first paragraph as one Markdown line."""
    return " ".join((cls.__doc__ or "").split("\n\n")[0].split()).replace("``", "`")


def table(cls) -> list[str]:
    """The Markdown table of one parameter class."""
    rows = ["| key | type | default | meaning |", "|---|---|---|---|"]
    for p in declared(cls):
        meaning = p.help + (f"; expected {p.expected}" if p.expected else "")
        default = "true" if p.default is True else "false" if p.default is False else repr(p.default)
        rows.append(f"| `{p.name}` | {TYPES.get(p.type, p.type.__name__)} | `{_cell(default)}` | {_cell(meaning)} |")
    return rows


def markdown() -> str:
    out = [HEAD]
    for title, cls in SECTIONS:
        out += [f"## {title}", "", _doc(cls), ""]
        out += table(cls) + [""]
    by_class: dict = {}
    for s in registry.SCHEDULERS.values():
        if s.config is not None:
            by_class.setdefault(s.config, []).append(s.name)
    for cls, names in by_class.items():
        out += [f"## scheduler={' or '.join(names)}", "", _doc(cls), ""]
        out += table(cls) + [""]
    return "\n".join(out).rstrip() + "\n"


if __name__ == "__main__":
    print(markdown(), end="")
