"""`bench ui`: the Dagster UI on this project's definitions and instance."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from bench_pipeline.cli import common


def cmd_ui(args: argparse.Namespace) -> int:
    """Start `dagster dev` on this project's definitions and instance."""

    from bench_pipeline.defs.launcher import ensure_dagster_home

    paths = common.paths_of(args)
    ensure_dagster_home(paths)
    os.environ.setdefault("BENCH_HOME", str(paths.home))
    argv = [
        "dagster",
        "dev",
        "-w",
        str(Path(__file__).resolve().parents[2] / "workspace.yaml"),
        "-p",
        str(args.port),
    ]
    os.execvp(argv[0], argv)
    return common.EXIT_OK  # pragma: no cover - exec does not return


def register(add: common.AddCommand) -> None:
    u = add("ui", cmd_ui)
    u.add_argument("--port", type=int, default=3000)
