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
from bench_pipeline.formats.refs import FactoryView, normalized


@dataclass
class LoadedFactory:
    root: Path
    suites: list[tuple[Suite, list[Task]]] = field(default_factory=list)
    launches: dict[str, Launch] = field(default_factory=dict)


def is_factory(path: Path) -> bool:
    return (path / "agents").is_dir() and (path / "benchmarks").is_dir()


def factories_below(path: Path, depth: int = 3) -> list[Path]:
    """Factories up to `depth` folders below `path` (relative to it), nearest first; hidden
    folders and virtual environments are not searched."""
    found: list[Path] = []
    level = [path]
    for _ in range(depth):
        nxt = []
        for folder in level:
            try:
                children = sorted(c for c in folder.iterdir() if c.is_dir())
            except OSError:
                continue
            for child in children:
                if child.name.startswith((".", "__")) or child.name in ("node_modules", "venv"):
                    continue
                if is_factory(child):
                    found.append(child.relative_to(path))
                else:
                    nxt.append(child)
        level = nxt
    return found


def load_factory(path: Path) -> LoadedFactory:
    """Everything a factory holds, validated; a launch file validates that launch and its suite."""
    path = normalized(path)
    if path.is_file():
        launch = load_launch(path)
        out = LoadedFactory(launch.factory_root)
        out.launches[path.stem] = launch
        out.suites.append((launch.suite, list(launch.tasks)))
        return out
    if not is_factory(path):
        found = factories_below(path)
        hint = (
            f"pass one, e.g. `bench validate {found[0]}`"
            + (f" (also: {', '.join(map(str, found[1:]))})" if found[1:] else "")
            if found
            else "pass a factory folder or a launch file"
        )
        raise BenchInputError(
            str(path), None, f"not a factory: expected agents/ and benchmarks/ folders; {hint}"
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
