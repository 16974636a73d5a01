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


def test_a_runs_tasks_are_stored_apart_read_when_used_and_the_run_reads_back_whole(
    tmp_path: Path,
) -> None:
    import pickle
    from dataclasses import replace

    from bench_pipeline.formats.taskset import StoredTasks
    from bench_pipeline.runs import benchmark_run
    from bench_pipeline.runs.benchmark_run import load_run, save_run
    from bench_pipeline.warehouse import layout
    from bench_pipeline.warehouse.store import Warehouse

    warehouse = Warehouse(tmp_path)
    run = perf_analysis().make_run(30, 2, 2, run_id="perf-20250101T000000-0000")
    save_run(run, warehouse)
    path = tmp_path / layout.manifest(run.run_id)
    tasks_path = tmp_path / layout.run_tasks(run.run_id)
    stored = json.loads(path.read_text())
    assert stored["launch"]["tasks"] == benchmark_run.TASKS_OF_TASKSET
    assert stored["taskset"]["tasks"] == {"file": layout.run_tasks(run.run_id), "count": 30}
    assert [t["id"] for t in json.loads(tasks_path.read_text())] == [
        t.id for t in run.taskset.tasks
    ]

    benchmark_run._loaded.clear()  # (read the files, not this process's copy)
    back = load_run(run.run_id, warehouse)
    assert isinstance(back.taskset.tasks, StoredTasks)
    assert back.launch.tasks is back.taskset.tasks  # (one list, read once)
    # counting the tasks reads none of them
    assert len(back.taskset.tasks) == 30 and back.launch.trial_count == run.launch.trial_count
    assert not back.taskset.tasks.loaded
    assert back == run and back.taskset.tasks.loaded
    assert back.taskset.tasks == run.taskset.tasks and run.taskset.tasks == back.taskset.tasks
    assert back.taskset.tasks[2] == run.taskset.tasks[2] and back.taskset.task("task-003")
    assert gc.isenabled()  # (the collector, held off while the tasks were read, is back on)
    # pickled as the tuple it stands for (a run handed to another process)
    assert pickle.loads(pickle.dumps(back)) == run
    assert type(pickle.loads(pickle.dumps(back)).taskset.tasks) is tuple
    # saved again (an adaptive run's next round): the same files, the tasks not rewritten
    written = tasks_path.stat().st_mtime_ns
    save_run(replace(back, rounds=2), warehouse)
    assert tasks_path.stat().st_mtime_ns == written
    benchmark_run._loaded.clear()
    assert load_run(run.run_id, warehouse) == replace(run, rounds=2)

    # a tasks file that does not hold the manifest's tasks is an error naming it, when used
    tasks_path.write_text(json.dumps(json.loads(tasks_path.read_text())[:29]))
    benchmark_run._loaded.clear()
    short = load_run(run.run_id, warehouse)
    assert len(short.taskset.tasks) == 30
    with pytest.raises(LookupError, match=f"{tasks_path}: holds 29 tasks, the run's manifest 30"):
        list(short.taskset.tasks)
    tasks_path.unlink()
    benchmark_run._loaded.clear()
    with pytest.raises(LookupError, match=f"{tasks_path}: the run's frozen tasks cannot be read"):
        load_run(run.run_id, warehouse).taskset.task("task-000")

    # manifests of earlier versions hold the tasks inline: once (the launch's marked) or twice
    once = to_jsonable(replace(run, launch=replace(run.launch, tasks=())))
    once["launch"]["tasks"] = benchmark_run.TASKS_OF_TASKSET
    for manifest in (once, to_jsonable(run)):
        path.write_text(json.dumps(manifest))
        benchmark_run._loaded.clear()
        old = load_run(run.run_id, warehouse)
        assert old == run and old.launch.tasks is old.taskset.tasks
        assert type(old.taskset.tasks) is tuple

    # a launch whose tasks are not the task set's keeps its own
    save_run(run, warehouse)  # (the tasks' file written again: it was removed above)
    other = replace(run, launch=replace(run.launch, tasks=run.taskset.tasks[:3]))
    save_run(other, warehouse)
    assert isinstance(json.loads(path.read_text())["launch"]["tasks"], list)
    benchmark_run._loaded.clear()
    assert load_run(run.run_id, warehouse) == other
