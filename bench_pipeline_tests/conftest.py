"""Shared fixtures: a seeded example factory, an isolated bench home, the CLI in-process."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SEED = ROOT / "data" / "seed.py"

# Telemetry off for every Dagster call the tests make.
os.environ["DAGSTER_DISABLE_TELEMETRY"] = "1"
# No `bench` a test starts leaves a warm server behind (run with -s, its stderr is a terminal);
# the tests of that start it themselves (test_serve.py).
os.environ["BENCH_AUTO_SERVE"] = "0"


@pytest.fixture(scope="session", autouse=True)
def machine_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The user cache folder (XDG_CACHE_HOME) of every test and the processes it starts: one
    for the session, so what bench keeps per machine (a new Dagster instance's template files)
    is made once for the whole suite and never written into the real user's cache."""
    cache = tmp_path_factory.mktemp("xdg-cache")
    before = os.environ.get("XDG_CACHE_HOME")
    os.environ["XDG_CACHE_HOME"] = str(cache)
    yield cache
    if before is None:
        os.environ.pop("XDG_CACHE_HOME", None)
    else:
        os.environ["XDG_CACHE_HOME"] = before


@pytest.fixture(scope="session")
def seeded_example(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The example (service repo + factory) seeded once per session; treat it as read-only."""
    out = tmp_path_factory.mktemp("example") / "example"
    subprocess.run([sys.executable, str(SEED), "--out", str(out)], check=True, capture_output=True)
    return out


@pytest.fixture()
def example(seeded_example: Path, tmp_path: Path) -> Path:
    """A private, writable copy of the seeded example (the factory is a git repo; the suite
    points at ../../../service-repo, so both are copied together)."""
    dest = tmp_path / "example"
    shutil.copytree(seeded_example, dest, symlinks=True)
    return dest


@pytest.fixture()
def factory(example: Path) -> Path:
    return example / "factory"


@pytest.fixture()
def bench_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """An isolated BENCH_HOME and DAGSTER_HOME for one test."""
    home = tmp_path / "bench-home"
    home.mkdir()
    monkeypatch.setenv("BENCH_HOME", str(home))
    monkeypatch.setenv("DAGSTER_HOME", str(home / "dagster_home"))
    yield home


def run_bench(*args: str, home: Path) -> tuple[int, str, str]:
    """Run the CLI in-process; returns (exit code, stdout, stderr)."""
    import contextlib
    import io

    from bench_pipeline.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["--home", str(home), *args])
    return code, out.getvalue(), err.getvalue()
