"""`bench ui`: the Dagster UI on this project's definitions and instance."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from bench_pipeline.cli import common
from bench_pipeline.formats.files import installed_program


def cmd_ui(args: argparse.Namespace) -> int:
    """Start `dagster dev` on this project's definitions and instance."""
    from bench_pipeline.defs.launcher import ensure_dagster_home, open_instance

    paths = common.paths_of(args)
    # (opened here first: a dagster.yaml Dagster cannot use is one line, not `dagster dev`'s
    # traceback once its webserver starts)
    open_instance(ensure_dagster_home(paths))
    os.environ.setdefault("BENCH_HOME", str(paths.home))
    argv = [
        installed_script("dagster"),
        "dev",
        "-w",
        str(Path(__file__).resolve().parents[2] / "workspace.yaml"),
        "-p",
        str(args.port),
    ]
    os.execvp(argv[0], argv)
    return common.EXIT_OK  # pragma: no cover - exec does not return


def installed_script(name: str) -> str:
    """A console script of this installation: beside the running interpreter (a venv's bin/,
    which need not be on PATH), else on PATH."""
    found = installed_program(name)
    if found is None:
        raise common.CliError(
            f"`{name}` is not installed next to {sys.executable} nor on PATH; "
            "reinstall with `make install` (or `pip install -e .`)"
        )
    return found


def register(add: common.AddCommand) -> None:
    u = add("ui", cmd_ui)
    u.add_argument("--port", type=int, default=3000)
