"""Frozen dataclasses to JSON and back (`formats.serialize`): what a run's frozen launch is
stored as and read back from, by every process that runs a part of it."""

from __future__ import annotations

import gc
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from bench_pipeline.formats.serialize import from_jsonable, to_jsonable
from bench_pipeline_tests.perf_scripts import perf_analysis


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


@dataclass(frozen=True)
class Checked:
    n: int

    def __post_init__(self) -> None:
        if self.n < 0:
            raise ValueError(f"n must be >= 0, not {self.n}")


@dataclass(frozen=True)
class OwnInit:
    n: int

    def __init__(self, n: int) -> None:  # (its own: dataclass keeps it)
        object.__setattr__(self, "n", n * 10)


def test_a_plain_dataclass_is_filled_in_as_its_init_would_fill_it() -> None:
    """A plain frozen dataclass (Leaf: no __post_init__, no default factory) is rebuilt
    without its __init__, for speed: the result must be the one __init__ makes, a missing
    field without a default must still raise, and a class with a __post_init__ still runs it."""
    back = from_jsonable(Leaf, {"name": "a", "where": "/x"})
    made = Leaf("a", Path("/x"))
    assert back == made and hash(back) == hash(made) and vars(back) == vars(made)
    assert back.weights == () and isinstance(back.where, Path)
    with pytest.raises(TypeError, match="name"):
        from_jsonable(Leaf, {"where": "/x"})
    with pytest.raises(ValueError, match="n must be >= 0"):
        from_jsonable(Checked, {"n": -1})
    assert from_jsonable(Checked, {"n": 2}) == Checked(2)
    assert from_jsonable(OwnInit, {"n": 2}).n == 20  # (an __init__ of its own runs)


def test_a_runs_manifest_holds_its_tasks_once_and_reads_back_whole(tmp_path: Path) -> None:
    from dataclasses import replace

    from bench_pipeline.runs import benchmark_run
    from bench_pipeline.runs.benchmark_run import load_run, save_run
    from bench_pipeline.warehouse import layout
    from bench_pipeline.warehouse.store import Warehouse

    warehouse = Warehouse(tmp_path)
    run = perf_analysis().make_run(30, 2, 2, run_id="perf-20250101T000000-0000")
    save_run(run, warehouse)
    path = tmp_path / layout.manifest(run.run_id)
    stored = json.loads(path.read_text())
    assert stored["launch"]["tasks"] == benchmark_run.TASKS_OF_TASKSET
    assert len(stored["taskset"]["tasks"]) == 30
    benchmark_run._loaded.clear()  # (read the file, not this process's copy)
    back = load_run(run.run_id, warehouse)
    assert back == run
    assert back.launch.tasks is back.taskset.tasks  # (rebuilt once)
    assert gc.isenabled()  # (the collector, held off while the manifest was read, is back on)
    # a manifest of an earlier version holds the tasks twice: read as the same run
    path.write_text(json.dumps(to_jsonable(run)))
    benchmark_run._loaded.clear()
    assert load_run(run.run_id, warehouse) == run
    # a launch whose tasks are not the task set's keeps its own
    other = replace(run, launch=replace(run.launch, tasks=run.taskset.tasks[:3]))
    save_run(other, warehouse)
    assert isinstance(json.loads(path.read_text())["launch"]["tasks"], list)
    benchmark_run._loaded.clear()
    assert load_run(run.run_id, warehouse) == other
