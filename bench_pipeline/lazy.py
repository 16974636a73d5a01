"""Import heavy optional SDKs on first use: `anthropic` alone takes 1-5 s to import, which every
`bench` command and every Dagster step would pay even when no model is called."""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any


class LazyModule:
    def __init__(self, name: str):
        self._name = name
        self._module: ModuleType | None = None

    def __getattr__(self, attr: str) -> Any:
        if self._module is None:
            self._module = importlib.import_module(self._name)
        return getattr(self._module, attr)


anthropic: Any = LazyModule("anthropic")
