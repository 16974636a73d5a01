"""Frozen dataclasses to JSON and back (`formats.serialize`): what a run's frozen launch is
stored as and read back from, by every process that runs a part of it."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench_pipeline.formats.serialize import from_jsonable, to_jsonable


@dataclass(frozen=True)
class Leaf:
    name: str
    where: Path | None = None
    weights: tuple[float, ...] = ()


@dataclass(frozen=True)
class Node:
    leaf: Leaf
    children: tuple[Node, ...] = ()  # (a type that refers to itself)
    by_name: dict[str, Leaf] = field(default_factory=dict)
    pair: tuple[Leaf, Path] | None = None
    listed: list[Leaf | None] = field(default_factory=list)
    paths: list[Path] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)
    either: int | str | None = None
    tags: tuple[str, ...] = ()


def test_a_tree_of_dataclasses_survives_json() -> None:
    leaf = Leaf("a", Path("/x/y"), (0.5, 1.0))
    tree = Node(
        leaf,
        children=(Node(Leaf("b")), Node(Leaf("c"), children=(Node(Leaf("d", None)),))),
        by_name={"k": leaf, "m": Leaf("m", weights=(2.0,))},
        pair=(Leaf("p"), Path("rel/path")),
        listed=[leaf, None, Leaf("q")],
        paths=[Path("/a"), Path("b/c")],
        extra={"nested": {"n": [1, 2, None]}, "none": None},
        either="text",
        tags=("x", "y"),
    )
    back = from_jsonable(Node, json.loads(json.dumps(to_jsonable(tree))))
    assert back == tree
    assert isinstance(back.children[1].children[0], Node)
    assert isinstance(back.pair[1], Path) and isinstance(back.paths[1], Path)
    assert isinstance(back.tags, tuple) and isinstance(back.listed, list)
    # a field missing from older JSON takes its default; an unknown key is ignored
    old = to_jsonable(Node(Leaf("z")))
    del old["tags"]
    old["added_later"] = 1
    assert from_jsonable(Node, old) == Node(Leaf("z"))
    assert from_jsonable(Node | None, None) is None
