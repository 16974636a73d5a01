"""The perf scripts as modules, for tests that use their generators (a million-trial script's
synthetic runs and rows, at a test's size)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]


def perf_analysis() -> ModuleType:
    """perf/analysis.py (not a package: loaded from its file)."""
    spec = importlib.util.spec_from_file_location("perf_analysis", ROOT / "perf" / "analysis.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
