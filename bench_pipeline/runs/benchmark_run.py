"""A benchmark run: one executed launch, frozen at start.

The frozen run (tasks with their resolved base commits and input hashes, configurations with
their resolved agent and skill texts, prices) is stored in the warehouse as a manifest, so any
process that executes a partition reads exactly what was launched, whatever happens to the
factory files meanwhile.
"""

from __future__ import annotations

import hashlib
import json
import secrets
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench_pipeline import __version__
from bench_pipeline.formats.model import AgentSpec, Config, Launch, Prices
from bench_pipeline.formats.serialize import collector_paused, from_jsonable, to_jsonable
from bench_pipeline.formats.taskset import FrozenTaskSet, StoredTasks, freeze
from bench_pipeline.trials.runner import TrialSpec
from bench_pipeline.warehouse import layout
from bench_pipeline.warehouse.store import CorruptFileError, Warehouse

BASELINE_CONFIG_ID = "original"  # the recorded originals; "baseline" is the pinned run


@dataclass(frozen=True)
class BenchmarkRun:
    run_id: str
    created_at: str
    launch: Launch
    taskset: FrozenTaskSet
    prices: Prices
    launch_path: str
    agent_file_hashes: dict[str, str]  # factory-relative agent file -> sha256 at launch
    engine_version: str = __version__
    # Adaptive repetitions: the rounds decided so far (the run grows one round at a time up to
    # the plan's max); None for a fixed count.
    rounds: int | None = None

    @property
    def suite(self) -> str:
        return self.launch.suite.name

    @property
    def repetitions(self) -> int:
        """Repetitions this run executes: the rounds decided so far, else the launch's count."""
        return self.rounds if self.rounds is not None else self.launch.repetitions

    def config(self, config_id: str) -> Config:
        for c in self.launch.configs:
            if c.id == config_id:
                return c
        raise KeyError(f"run {self.run_id} has no configuration '{config_id}'")

    def partitions(self) -> list[tuple[str, int]]:
        """(config, repetition) pairs in execution order: configurations reverse each rep."""
        order = []
        for rep in range(1, self.repetitions + 1):
            configs = [c.id for c in self.launch.configs]
            order.extend((c, rep) for c in (configs if rep % 2 else reversed(configs)))
        return order

    def trial_specs(self, config_id: str, repetition: int) -> list[TrialSpec]:
        """The partition's trials; task order reverses from one repetition to the next."""
        config = self.config(config_id)
        tasks = list(self.taskset.tasks)
        if repetition % 2 == 0:
            tasks.reverse()
        baseline = config.agent.kind == "replay"
        return [TrialSpec(t, config, repetition, baseline) for t in tasks]

    def runs_row(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "suite": self.suite,
            "launch": self.launch.name,
            "task_set_revision": self.taskset.revision,
            "created_at": datetime.fromisoformat(self.created_at),
            "configs_json": json.dumps(
                [
                    {
                        "id": c.id,
                        "hash": c.hash,
                        "agent": c.agent.name,
                        "kind": c.agent.kind,
                        "model": c.agent.model,
                        "effort": c.agent.effort,
                        "factory_ref": c.factory_ref,
                        "factory_sha": c.factory_sha,
                    }
                    for c in self.launch.configs
                ]
            ),
            "scorers_json": json.dumps(list(self.launch.scorers)),
            "judge_json": json.dumps(to_jsonable(self.launch.judge)),
            "repetitions": self.repetitions,
            "engine_version": self.engine_version,
        }


def new_run_id(suite: str, now: datetime | None = None) -> str:
    now = now or datetime.now(UTC)
    return f"{suite}-{now:%Y%m%dT%H%M%S}-{secrets.token_hex(2)}"


def with_original_config(launch: Launch) -> Launch:
    """The launch as it runs: `include_baseline: true` adds the recorded originals (a replay
    config) unless the launch already has one. The estimate and the run both count this."""
    if launch.adds_original_config:
        replay = Config(
            id=BASELINE_CONFIG_ID,
            agent=AgentSpec(name="replay", kind="replay", timeout_seconds=600),
            max_parallel=launch.max_parallel,
        )
        launch = replace(launch, configs=(*launch.configs, replay))
    return launch


def freeze_run(launch: Launch, prices: Prices, launch_path: str | Path) -> BenchmarkRun:
    """Freeze a validated launch into a new benchmark run (not yet stored)."""
    launch = with_original_config(launch)
    taskset = freeze(launch.suite.name, launch.suite.directory, launch.tasks)
    now = datetime.now(UTC)
    return BenchmarkRun(
        run_id=new_run_id(launch.suite.name, now),
        created_at=now.isoformat(),
        launch=launch,
        taskset=taskset,
        prices=prices,
        launch_path=str(Path(launch_path).absolute()),
        agent_file_hashes=agent_file_hashes(launch),
        rounds=launch.adaptive.min if launch.adaptive else None,
    )


def agent_file_hashes(launch: Launch) -> dict[str, str]:
    out = {}
    for c in launch.configs:
        path = launch.factory_root / "agents" / f"{c.agent.name}.yaml"
        if path.is_file():
            out[f"agents/{c.agent.name}.yaml"] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def agent_drift(run: BenchmarkRun) -> list[str]:
    """Agent files that changed in the live factory since the run was frozen."""
    drifted = []
    for rel, sha in run.agent_file_hashes.items():
        path = run.launch.factory_root / rel
        now = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None
        if now != sha:
            drifted.append(rel)
    return drifted


def run_exists(warehouse: Warehouse, run_id: str) -> bool:
    """Whether a benchmark run with this id was frozen into the warehouse."""
    return warehouse.exists(layout.manifest(run_id))


def save_run(run: BenchmarkRun, warehouse: Warehouse) -> None:
    """Store the frozen run: its tasks' file first (once: a run's tasks never change), then
    the manifest that names it, so a run whose manifest exists always has its tasks."""
    tasks_at = layout.run_tasks(run.run_id)
    if not warehouse.exists(tasks_at):
        warehouse.write_json(tasks_at, to_jsonable(run.taskset.tasks))
    path = warehouse.write_json(layout.manifest(run.run_id), run_manifest(run))
    _loaded.pop(path, None)
    warehouse.write("runs", [run.runs_row()], run.run_id, "run")


# What a manifest's `launch.tasks` says when they are the task set's tasks (the frozen task set
# is the launch's tasks, so every run has it): written once, the manifest of a 25,000-task run
# is 8.8 MB, not 17.6, and half as long to parse and rebuild (0.73 -> 0.36 s).
TASKS_OF_TASKSET = "taskset.tasks"


def run_manifest(run: BenchmarkRun) -> dict[str, Any]:
    """The stored form of a run (`run_from_manifest` reads it back). The task set's tasks are
    in their own file (`layout.run_tasks`, written by `save_run`): the manifest names it and
    holds their count."""
    same = run.launch.tasks is run.taskset.tasks or run.launch.tasks == run.taskset.tasks
    data = to_jsonable(
        replace(run, launch=replace(run.launch, tasks=()), taskset=replace(run.taskset, tasks=()))
    )
    data["taskset"]["tasks"] = {
        "file": layout.run_tasks(run.run_id),
        "count": len(run.taskset.tasks),
    }
    data["launch"]["tasks"] = TASKS_OF_TASKSET if same else to_jsonable(run.launch.tasks)
    return data


def run_from_manifest(data: dict[str, Any], warehouse: Warehouse | None = None) -> BenchmarkRun:
    """A run from its stored form. The task set's tasks are read from their own file when
    first used (the manifest names it: `warehouse` is where); manifests of earlier versions
    hold them inline, once (the launch's written as TASKS_OF_TASKSET) or twice (an equal
    copy), and the launch's tasks are then the task set's, rebuilt once."""
    launch, taskset = data["launch"], data["taskset"]
    stored = taskset.get("tasks")
    if isinstance(stored, dict):
        if warehouse is None:
            raise ValueError("a manifest whose tasks are in their own file needs its warehouse")
        rel = stored["file"]
        tasks: Any = StoredTasks(
            int(stored["count"]), lambda: warehouse.read_json(rel), str(warehouse.root / rel)
        )
        data = {**data, "taskset": {**taskset, "tasks": []}}
    else:
        tasks = None
    own = launch.get("tasks")
    launch_has_own = own != TASKS_OF_TASKSET and (tasks is not None or own != stored)
    if not launch_has_own:
        data = {**data, "launch": {**launch, "tasks": []}}
    run = from_jsonable(BenchmarkRun, data)
    if tasks is not None:
        run = replace(run, taskset=replace(run.taskset, tasks=tasks))
    if launch_has_own:
        return run
    return replace(run, launch=replace(run.launch, tasks=run.taskset.tasks))


# Manifests this process has parsed, by file identity: every Dagster step of a run loads the
# same manifest (~30 ms for 100 tasks), and a manifest is only ever replaced whole (temp file
# + rename: a new inode), never edited in place. The run is a frozen dataclass.
_loaded: dict[Path, tuple[tuple[int, int, int, int], BenchmarkRun]] = {}


def load_run(run_id: str, warehouse: Warehouse) -> BenchmarkRun:
    path = warehouse.root / layout.manifest(run_id)
    try:
        st = path.stat()
        ident = (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    except OSError:
        ident = None
    known = _loaded.get(path)
    if ident is not None and known is not None and known[0] == ident:
        return known[1]
    data = warehouse.read_json(layout.manifest(run_id))
    with collector_paused():
        try:
            run = run_from_manifest(data, warehouse)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            # JSON of another shape (`{}`, `[]`, another file put in its place) is as
            # unreadable as JSON cut short: named the same way, to move aside the same way
            raise CorruptFileError(path, ValueError(_not_a_manifest(data, exc)), "JSON") from None
    if ident is not None:
        _loaded[path] = (ident, run)
    return run


def _not_a_manifest(data: Any, exc: Exception) -> str:
    if not isinstance(data, dict):
        return f"not a run manifest: a JSON {type(data).__name__}, not an object"
    if isinstance(exc, KeyError):
        return f"not a run manifest: no key {exc}"
    return f"not a run manifest: {exc}"
