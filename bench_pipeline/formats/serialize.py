"""Frozen dataclasses to JSON and back, so a benchmark run's frozen launch can be stored once
and read by any process (a Dagster step, a celery worker, a resumed run)."""

from __future__ import annotations

import dataclasses
import gc
import json
import types
import typing
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
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
    if isinstance(value, tuple | list) or (
        isinstance(value, Sequence) and not isinstance(value, str | bytes)
    ):
        return [to_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, Path):
        return str(value)
    return value


@contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector held off while a document of tens of thousands of
    objects is parsed and rebuilt, none of them garbage: every few hundred new objects it
    walked every object alive, and a 25,000-task run's manifest took 0.26 -> 0.07 s to parse
    without it (more in a process that already holds many, such as an analysis)."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()


@cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def from_jsonable(tp: Any, data: Any) -> Any:
    """`data` (as `to_jsonable` left it) as the type `tp`: dataclasses, tuples, lists and
    dicts of them rebuilt, `Path`s made, optional values kept None, anything else as it is."""
    return None if data is None else _converter(tp)(data)


Converter = Callable[[Any], Any]


def _identity(data: Any) -> Any:
    return data


@cache
def _converter(tp: Any) -> Converter:
    """How to rebuild a non-null value of `tp`, worked out once per type: a frozen run's
    manifest of 25,000 tasks took 4 s to read when every value asked `typing` what its type
    was (1.1 million calls), and a list or dict of plain values is copied, not walked."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        return _converter(args[0]) if len(args) == 1 else _identity
    if dataclasses.is_dataclass(tp):
        return _dataclass_converter(tp)
    if origin is tuple:
        args = typing.get_args(tp)
        if len(args) == 2 and args[1] is Ellipsis:
            item = _converter(args[0])
            if item is _identity:
                return tuple
            # (most such fields of a task are empty: no list made for them)
            return lambda data: (
                tuple([None if v is None else item(v) for v in data]) if data else ()
            )
        items = [_converter(a) for a in args]
        return lambda data: tuple(
            None if v is None else convert(v) for convert, v in zip(items, data, strict=False)
        )
    if origin is list:
        (arg,) = typing.get_args(tp) or (Any,)
        item = _converter(arg)
        if item is _identity:
            return list
        return lambda data: [None if v is None else item(v) for v in data]
    if origin is dict:
        _, vt = typing.get_args(tp) or (Any, Any)
        value = _converter(vt)
        if value is _identity:
            return dict
        return lambda data: {k: None if v is None else value(v) for k, v in data.items()}
    if tp is Path:
        return Path
    return _identity


def _dataclass_converter(cls: type) -> Converter:
    # (the fields' converters are worked out at the first value: a dataclass may refer to
    # itself, and building them here would recurse forever)
    # (the names of the fields taken as they are, and the fields rebuilt with their converter:
    # most of a task's fields are plain values, passed on without a call each)
    resolved: list[_Fields] = []

    def convert(data: Any) -> Any:
        if not resolved:  # (two threads may both work them out: the same lists either way)
            resolved.append(_Fields.of(cls))
        fields = resolved[0]
        if data.keys() <= fields.names:  # (the usual case: copied whole, in C)
            values = dict(data)
        else:  # (a field this code no longer has: left out)
            values = {name: v for name, v in data.items() if name in fields.names}
        for name, field in fields.rebuilt:
            if name in data:
                v = data[name]
                values[name] = None if v is None else field(v)
        return fields.make(values)

    return convert


class _Fields(typing.NamedTuple):
    """How `_dataclass_converter` rebuilds one dataclass."""

    names: frozenset[str]  # every field's
    rebuilt: list[tuple[str, Converter]]  # the fields not taken as they are, with converters
    make: Callable[[dict[str, Any]], Any]  # the instance from its fields' values

    @classmethod
    def of(cls, dc: type) -> _Fields:
        hints = _hints(dc)
        fields = [(f.name, _converter(hints[f.name])) for f in dataclasses.fields(dc)]
        return cls(
            frozenset(name for name, _ in fields),
            [(name, field) for name, field in fields if field is not _identity],
            _maker(dc),
        )


def _maker(dc: type) -> Callable[[dict[str, Any]], Any]:
    """`dc(**values)`, or, for a plain dataclass (no __post_init__, no slots, no field
    without a place in __init__), the same instance filled in at once: a frozen dataclass's
    __init__ sets each field through object.__setattr__, ~6 us a task of 20 fields, most of
    reading a 25,000-task manifest. A missing field without a default still raises as
    `dc(**values)` would."""
    fields = dataclasses.fields(dc)
    init = getattr(dc, "__init__", None)
    generated = getattr(getattr(init, "__code__", None), "co_filename", None) == "<string>"
    if (
        not dc.__dataclass_params__.init  # type: ignore[attr-defined]
        or not generated  # (an __init__ of the class's own: it runs)
        or hasattr(dc, "__post_init__")
        or "__slots__" in dc.__dict__
        or any(not f.init for f in fields)
        or any(f.default_factory is not dataclasses.MISSING for f in fields)
    ):
        return lambda values: dc(**values)
    defaults = {f.name: f.default for f in fields if f.default is not dataclasses.MISSING}
    required = frozenset(f.name for f in fields if f.default is dataclasses.MISSING)
    new = object.__new__

    def make(values: dict[str, Any]) -> Any:
        if not required <= values.keys():
            return dc(**values)  # (raises what __init__ says of the missing fields)
        obj = new(dc)
        state = obj.__dict__
        state.update(defaults)
        state.update(values)
        return obj

    return make
