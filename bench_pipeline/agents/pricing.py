"""Turning token counts into a `Usage` with a known or explicitly unknown cost.

Token convention for every agent: `input_tokens` are uncached input tokens (as the Messages API
reports them); cache reads and cache writes are counted separately and priced at their own rates.
"""

from __future__ import annotations

import math
from typing import Any

from bench_pipeline.agents.base import Usage
from bench_pipeline.formats.model import Prices


def priced_usage(
    prices: Prices,
    model: str | None,
    input_tokens: int | None = None,
    output_tokens: int | None = None,
    cache_read_tokens: int | None = None,
    cache_write_tokens: int | None = None,
) -> Usage:
    """Tokens priced with `prices`; cost None with a reason when the model has no price."""
    counts = (input_tokens, output_tokens, cache_read_tokens, cache_write_tokens)
    if all(c is None for c in counts):
        return Usage.unknown("agent reported no usage")
    if not model:
        return Usage(*counts, None, "tokens reported but no model known to price them")
    cost = prices.cost(
        model,
        input_tokens or 0,
        output_tokens or 0,
        cache_read_tokens or 0,
        cache_write_tokens or 0,
    )
    if cost is None:
        return Usage(*counts, None, f"no price for model '{model}' in prices.yaml")
    return Usage(*counts, cost, None)


# The most a count or a cost is believed to be: the warehouse stores counts as int64, and a
# number beyond it (JSON's Infinity, a 400-digit integer) is a broken report, not a count.
MAX_COUNT = 2**63 - 1


def as_int(value: Any) -> int | None:
    """A token count from JSON: ints (or integral floats/strings) from 0 to MAX_COUNT only;
    anything else -> None."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):  # (exact: a float would round a big one)
        return value if 0 <= value <= MAX_COUNT else None
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        return None
    if not math.isfinite(number) or number < 0 or number > MAX_COUNT or number != int(number):
        return None
    return int(number)


def as_cost(value: Any) -> float | None:
    """A cost in USD from JSON: a finite number >= 0; anything else (Infinity, NaN, a negative
    number, text) -> None."""
    if isinstance(value, bool) or value is None:
        return None
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        return None
    return number if math.isfinite(number) and number >= 0 else None


def over_budget(budget_usd: float | None, spent_usd: float | None) -> bool:
    """True when a known spend exceeds the budget (unknown spend never counts as over)."""
    return budget_usd is not None and spent_usd is not None and spent_usd > budget_usd


def add_spend(spent: float | None, usage: Usage) -> float | None:
    """Known spend plus this usage's cost; the known part keeps counting when a cost is unknown."""
    if usage.cost_usd is None:
        return spent
    return (spent or 0.0) + usage.cost_usd
