"""Commands beyond the core loop, each small and in one place: registered on the parser."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def register(add: Callable[..., Any]) -> None:
    """Nothing extra yet; later commands register here."""
