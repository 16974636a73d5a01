"""One registry per kind (agents, scorers): the only list of names anything consults.

An agent or scorer kind is a class that registers itself by name (`agents.base.register_agent`,
`scorers.base.register_scorer`), as Inspect AI's `@solver`/`@scorer` do; the loader, the
importer, the estimate and rescore ask the registry for names and traits (`offline`,
`uses_judge`, `takes_argument`), so a new kind is one file and its registration.

The registries live in the bottom layer because the factory loader must name every valid kind
in its errors, yet it may not import the packages that define them (they sit above it). The
built-in kinds are therefore loaded by module name the first time a registry is asked, the way
entry points are; a kind defined elsewhere (a plugin, a test) registers when its module is
imported.
"""

from __future__ import annotations

import importlib
import threading
from typing import Any


class KindRegistry:
    def __init__(self, what: str, builtin_package: str, name_attribute: str):
        self.what = what
        self._builtin_package = builtin_package
        self._name_attribute = name_attribute
        self._kinds: dict[str, type] = {}
        self._loaded = False
        self._lock = threading.Lock()

    def register(self, cls: type) -> type:
        """Class decorator: register `cls` under its `kind`/`name` class attribute."""
        name = getattr(cls, self._name_attribute)
        existing = self._kinds.get(name)
        if existing is not None and existing.__qualname__ != cls.__qualname__:
            raise ValueError(f"{self.what} kind '{name}' is already registered by {existing}")
        self._kinds[name] = cls
        return cls

    def _ensure_builtins(self) -> None:
        if self._loaded:
            return
        with self._lock:
            if not self._loaded:
                importlib.import_module(self._builtin_package)
                self._loaded = True

    def names(self) -> tuple[str, ...]:
        self._ensure_builtins()
        return tuple(self._kinds)

    def __contains__(self, name: object) -> bool:
        self._ensure_builtins()
        return name in self._kinds

    def get(self, name: str) -> type:
        self._ensure_builtins()
        try:
            return self._kinds[name]
        except KeyError:
            raise KeyError(
                f"no {self.what} kind '{name}'; known: {', '.join(self._kinds)}"
            ) from None

    def trait(self, name: str, trait: str, default: Any = False) -> Any:
        """A class attribute of kind `name` (False for a kind that is not registered)."""
        return getattr(self.get(name), trait, default) if name in self else default

    def with_trait(self, trait: str) -> tuple[str, ...]:
        return tuple(n for n in self.names() if getattr(self._kinds[n], trait, False))


AGENT_KINDS = KindRegistry("agent", "bench_pipeline.agents", "kind")
SCORER_KINDS = KindRegistry("scorer", "bench_pipeline.scorers", "name")


def scorer_kind(spec: str) -> str:
    """'workflow:fmt' -> 'workflow'; 'checks' -> 'checks'."""
    return spec.partition(":")[0]


def uses_judge(scorer_specs: tuple[str, ...] | list[str]) -> bool:
    """Whether any of a launch's scorers calls the judge model."""
    return any(SCORER_KINDS.trait(scorer_kind(s), "uses_judge") for s in scorer_specs)
