"""Scenario parameters: defaults from the scenario, overrides from ``--set key=value``."""

from __future__ import annotations

import math

from fedemu.fabric.errors import ConfigError


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
        out[key.strip()] = parse_value(value)
    return out


def resolve(defaults: dict, overrides: dict) -> dict:
    """Defaults updated by overrides; an unknown key or a wrongly typed value is a ConfigError."""
    params = dict(defaults)
    for key, value in overrides.items():
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
        params[key] = value
    return params
