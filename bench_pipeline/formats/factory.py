"""Load a whole factory (every agent, suite, task and launch) or one launch, for `bench validate`."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from bench_pipeline.formats.errors import BenchInputError
from bench_pipeline.formats.loader import (
    load_agent,
    load_launch,
    load_prices,
    load_suite,
    load_tasks,
)
from bench_pipeline.formats.model import Launch, Suite, Task
from bench_pipeline.formats.refs import FactoryView


@dataclass
class LoadedFactory:
    root: Path
    suites: list[tuple[Suite, list[Task]]] = field(default_factory=list)
    launches: dict[str, Launch] = field(default_factory=dict)


def load_factory(path: Path) -> LoadedFactory:
    """Everything a factory holds, validated; a launch file validates that launch and its suite."""
    path = path.absolute()
    if path.is_file():
        launch = load_launch(path)
        out = LoadedFactory(launch.factory_root)
        out.launches[path.stem] = launch
        out.suites.append((launch.suite, list(launch.tasks)))
        return out
    if not (path / "agents").is_dir() or not (path / "benchmarks").is_dir():
        raise BenchInputError(
            str(path),
            None,
            "not a factory: expected agents/ and benchmarks/ folders (or give a launch file)",
        )
    view = FactoryView(path)
    load_prices(view)
    out = LoadedFactory(path)
    for name in view.agent_names():
        load_agent(view, name)
    for name in view.suite_names():
        suite = load_suite(view, name)
        out.suites.append((suite, load_tasks(view, suite)))
    for launch_file in sorted((path / "launches").glob("*.yaml")):
        out.launches[launch_file.stem] = load_launch(launch_file, path)
    return out
