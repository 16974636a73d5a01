"""How numbers are written wherever a person reads them (CLI tables, recommendation notes,
commit messages, Dagster metadata): one set of formatters, each told what to show for a
missing value, because an unknown number is never written as 0."""

from __future__ import annotations

import math
from typing import Any


def is_missing(value: Any) -> bool:
    if value is None:
        return True
    try:
        return math.isnan(float(value))
    except (TypeError, ValueError):
        return False


def number(value: Any, digits: int = 3, missing: str = "-") -> str:
    return missing if is_missing(value) else f"{float(value):.{digits}f}"


def usd(value: Any, missing: str = "unknown", digits: int = 4) -> str:
    return missing if is_missing(value) else f"${float(value):.{digits}f}"


def percent(value: Any, missing: str = "n/a") -> str:
    """A share in [0, 1] as a percentage."""
    return missing if is_missing(value) else f"{float(value) * 100:.1f}%"


def short(value: Any, missing: str = "") -> str:
    """Four significant digits for floats, the value itself otherwise."""
    if isinstance(value, float):
        return missing if math.isnan(value) else f"{value:.4g}"
    return missing if value is None else str(value)
