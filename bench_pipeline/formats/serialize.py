"""Frozen dataclasses to JSON and back, so a benchmark run's frozen launch can be stored once
and read by any process (a Dagster step, a celery worker, a resumed run)."""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from functools import cache
from pathlib import Path
from typing import Any


def readable_json(value: Any) -> str:
    """JSON as people read a file of it: a dict one key per line, a list one item per line,
    each value compact. `json.dumps(indent=2)` reads as well but runs in pure Python (~4x
    slower: ~0.25 ms for a trial's metadata, out of a text case's ~5 ms budget)."""
    encode = _ENCODER.encode
    if isinstance(value, dict) and value:
        items = (f"  {encode(str(k))}: {encode(v)}" for k, v in value.items())
        return "{\n" + ",\n".join(items) + "\n}\n"
    if isinstance(value, list) and value:
        return "[\n" + ",\n".join(f"  {encode(v)}" for v in value) + "\n]\n"
    return encode(value) + "\n"


# `json.dumps(v, default=str)`'s encoder, made once: dumps builds a new one per call when given
# `default` (a third of readable_json's time on a trial's metadata).
_ENCODER = json.JSONEncoder(default=str)


def to_jsonable(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, tuple | list):
        return [to_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, Path):
        return str(value)
    return value


@cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def from_jsonable(tp: Any, data: Any) -> Any:
    if data is None:
        return None
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        return from_jsonable(args[0], data) if len(args) == 1 else data
    if dataclasses.is_dataclass(tp):
        hints = _hints(tp)
        kwargs = {
            f.name: from_jsonable(hints[f.name], data[f.name])
            for f in dataclasses.fields(tp)
            if f.name in data
        }
        return tp(**kwargs)
    if origin is tuple:
        args = typing.get_args(tp)
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(from_jsonable(args[0], v) for v in data)
        return tuple(from_jsonable(a, v) for a, v in zip(args, data, strict=False))
    if origin is list:
        (arg,) = typing.get_args(tp) or (Any,)
        return [from_jsonable(arg, v) for v in data]
    if origin is dict:
        _, vt = typing.get_args(tp) or (Any, Any)
        return {k: from_jsonable(vt, v) for k, v in data.items()}
    if tp is Path:
        return Path(data)
    return data
