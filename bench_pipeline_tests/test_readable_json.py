"""`readable_json`: the evidence and warehouse JSON files people read — a dict one key per line,
a list one item per line, each value compact, values JSON cannot hold written as their text."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from bench_pipeline.formats.serialize import readable_json


def _each_value_dumped(value: object) -> str:
    """The format spelled out with `json.dumps` per value (what readable_json must print)."""
    if isinstance(value, dict) and value:
        lines = [f"  {json.dumps(str(k))}: {json.dumps(v, default=str)}" for k, v in value.items()]
        return "{\n" + ",\n".join(lines) + "\n}\n"
    if isinstance(value, list) and value:
        return "[\n" + ",\n".join(f"  {json.dumps(v, default=str)}" for v in value) + "\n]\n"
    return json.dumps(value, default=str) + "\n"


WHEN = datetime(2026, 12, 2, 5, 30, tzinfo=UTC)
VALUES = [
    {},
    [],
    None,
    'text with "quotes", a tab\t and ünïcode',
    {"a": 1, "b": [1, 2.5, None], "c": {"nested": True}, 3: "int key", "path": Path("/x/y")},
    [{"turn": 1, "user": "hi", "latency_ms": 8.6, "cost_usd": None}, WHEN, float("nan")],
    {"when": WHEN, "inf": float("inf"), "set-like": ("a", "b")},
]


@pytest.mark.parametrize("value", VALUES, ids=range(len(VALUES)))
def test_readable_json_prints_each_value_as_json_dumps_does(value: object) -> None:
    text = readable_json(value)
    assert text == _each_value_dumped(value)
    if value not in ({}, []) and not isinstance(value, dict | list):
        return
    # and it reads back as JSON (values JSON cannot hold come back as their text)
    parsed = json.loads(text)
    assert isinstance(parsed, type(value))
