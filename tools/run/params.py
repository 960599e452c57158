"""Scenario parameters: defaults from the scenario, overrides from ``--set key=value``: the edge where
``--set`` text becomes typed values, once.

A scenario may declare which keys apply to a run (``declare(params, given)``: the federation scenario
returns the common keys and the chosen scheduler's, each a ``model.Param`` of a parameter class); then a
key that does not apply is an error, every value is checked by its Param, and the run's parameters are
only those keys. A value is read as its key's type, which is its default's (``tests/test_paramdoc.py``
checks that every declared type is): a scenario without declarations has only its defaults to go by.
What builds the run then reads the parameter classes' instances (``model.typed``), not this text.

The reading is our own (``parse_value`` and ``resolve``), not a structuring library's: it must keep a
value as given where it is already a number (the journal header holds the run's keys, and a replay
must write the same bytes), take a whole number for a number key and an integral float or ``inf`` for a
whole-number key (whose rule then decides), take text that looks like a number verbatim for a text key,
and say what is wrong in one line naming the key and the value.
"""

from __future__ import annotations

import math

from fedemu.fabric.errors import ConfigError
from fedemu.actors import registry
from fedemu.fabric.faults import RETIRED
from fedemu.model import Param


WHOLE_MAX = 2**63 - 1  # the largest whole number a journal header (msgpack, 64-bit) holds as a parameter


def parse_value(text: str):
    """``--set`` values: numbers where they look like numbers, true/false, inf, else the string."""
    low = text.strip().lower()
    if low in ("true", "false"):
        return low == "true"
    if low in ("inf", "infinity"):
        return math.inf
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        return text


def parse_overrides(items) -> dict:
    """``["a=1", "b=x"]`` -> ``{"a": 1, "b": "x"}``; a malformed item is a ConfigError."""
    out = {}
    for item in items or ():
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--set {item!r} is not key=value")
        key = key.strip()
        if key in out:
            raise ConfigError(f"--set {key} is given twice ({key}={out[key]!r}, then {item!r}); give each key once")
        out[key] = parse_value(value)
    return out


def resolve(defaults: dict, overrides: dict, declare=None) -> dict:
    """Defaults updated by overrides; an unknown key, a wrongly typed value or (with ``declare``) a key
    that does not apply or a value its Param rejects is a ConfigError."""
    params = dict(defaults)
    retired = {**RETIRED, **registry.retired()}  # fabric's retired keys (dup) and the schedulers'
    for key, value in overrides.items():
        if key in retired and key not in defaults:
            raise ConfigError(f"parameter {key!r}: {retired[key]}")
        if key not in defaults:
            raise ConfigError(f"unknown parameter {key!r}; known: {', '.join(sorted(defaults))}")
        default = defaults[key]
        if isinstance(default, bool):
            if not isinstance(value, bool):
                raise ConfigError(f"parameter {key!r} expects true or false, got {value!r}")
        elif isinstance(default, int) and not isinstance(value, bool) and isinstance(value, float):
            if value.is_integer():
                value = int(value)
            elif not math.isinf(value):
                raise ConfigError(f"parameter {key!r} expects a whole number, got {value!r}")
        elif isinstance(default, (int, float)) and not isinstance(value, (int, float)):
            raise ConfigError(f"parameter {key!r} expects a number, got {value!r}")
        elif isinstance(default, str) and not isinstance(value, str):  # a path or name that looks like a number
            value = str(value).lower() if isinstance(value, bool) else str(value)
        if isinstance(value, int) and not isinstance(value, bool) and abs(value) > WHOLE_MAX:
            if isinstance(default, float):  # a number key given a long integer: the float it means
                value = float(value)
            else:  # the journal stores whole numbers in 64 bits; a count this large fits no machine
                raise ConfigError(f"parameter {key!r} is {overrides[key]!r}; expected a whole number of at most "
                                  "2^63-1")
        params[key] = value
    if declare is None:
        return params
    applies = set()
    for _, declared in declare(params, tuple(overrides)):
        for p in declared:
            p.check(params[p.name])
            applies.add(p.name)
    return {k: v for k, v in params.items() if k in applies}


def resolve_scenario(module, overrides: dict) -> dict:
    """The parameters of a run of scenario ``module`` (its PARAMS, and its ``declare`` if it has one)."""
    return resolve(module.PARAMS, overrides, getattr(module, "declare", None))


def describe(module, overrides: dict) -> str:
    """``--help-params``: the keys that apply to a run of ``module`` with ``overrides``, with defaults
    (the scenario's) and meaning."""
    params = resolve_scenario(module, overrides)
    declare = getattr(module, "declare", None)
    if declare is not None:
        sections = declare(params, ())
    else:  # a scenario that declares nothing: its PARAMS, without meanings
        sections = [("parameters", tuple(Param(k, v, "") for k, v in module.PARAMS.items()))]
    rows = []  # (section, key, default, meaning)
    for title, declared in sections:
        for p in declared:
            default = module.PARAMS[p.name]
            text = "; ".join(x for x in (p.help, p.expected) if x)
            if params[p.name] != default:
                text += f" (now {params[p.name]!r})"
            rows.append((title, p.name, repr(default), text))
    name_w = max(len(r[1]) for r in rows)
    default_w = max(len(r[2]) for r in rows)
    lines, last = [], None
    for title, name, default, text in rows:
        if title != last:
            lines.append(f"{title} (key, default, meaning):")
            last = title
        lines.append(f"  {name:<{name_w}}  {default:<{default_w}}  {text}".rstrip())
    lines.append("set with --set KEY=VALUE")
    return "\n".join(lines)
