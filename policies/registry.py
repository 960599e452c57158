"""A small name -> factory registry whose misses raise the standard 'unknown X' ConfigError."""

from __future__ import annotations

from typing import Callable, Generic, TypeVar

from fedemu.fabric.errors import unknown_name

T = TypeVar("T")


class Registry(Generic[T]):
    """Factories by name; ``what`` names the kind in errors, e.g. ``unknown policy 'x'; known: ...``."""

    def __init__(self, what: str) -> None:
        self.what = what
        self._factories: dict[str, Callable[[], T]] = {}

    def register(self, name: str, factory: Callable[[], T]) -> None:
        """Add ``name``; registering a name twice is a programming error."""
        if name in self._factories:
            raise ValueError(f"{self.what} {name!r} registered twice")
        self._factories[name] = factory

    def get(self, name: str) -> T:
        """A new instance for ``name``, or ConfigError listing the known names."""
        factory = self._factories.get(name)
        if factory is None:
            raise unknown_name(self.what, name, self._factories)
        return factory()

    @property
    def names(self) -> tuple[str, ...]:
        """The registered names, sorted."""
        return tuple(sorted(self._factories))

    def __contains__(self, name: object) -> bool:
        return name in self._factories
