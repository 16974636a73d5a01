"""Progress of long work: one line per finished trial, written to a stream (stderr for `bench`)."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from typing import Any, TextIO


def trial_line(n: int, total: int, row: dict[str, Any]) -> str:
    cost = "?" if row.get("cost_usd") is None else f"${row['cost_usd']:.4f}"
    return (
        f"  [{n:>3}/{total}] {row['trial_id']:<40} {row['outcome']:<16} "
        f"{row['duration_seconds']:6.2f}s {cost}"
    )


def trial_progress(total: int, stream: TextIO | None = None) -> Callable[[dict[str, Any]], None]:
    """A callback for finished trial rows that writes `trial_line` for each."""
    out = stream or sys.stderr
    state = {"n": 0}
    lock = threading.Lock()  # trials finish on several threads at once

    def show(row: dict[str, Any]) -> None:
        with lock:
            state["n"] += 1
            out.write(trial_line(state["n"], total, row) + "\n")
            out.flush()

    return show
