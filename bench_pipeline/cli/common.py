"""What every command module shares: exit codes, the usage error, state paths, run lookup."""

from __future__ import annotations

import argparse
import json
import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench_pipeline.formats.files import replace_text
from bench_pipeline.runs.benchmark_run import BenchmarkRun, load_run, run_exists
from bench_pipeline.runs.paths import BenchPaths

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT = 0, 1, 2
EXIT_INTERRUPTED = 130  # as a shell reports a command stopped by Ctrl-C (128 + SIGINT)

# add(name, handler, help=handler's docstring) -> the command's parser (`main.build_parser`)
AddCommand = Callable[..., argparse.ArgumentParser]


class CliError(Exception):
    """A usage problem found by a command (exit 2)."""


def paths_of(args: argparse.Namespace) -> BenchPaths:
    from bench_pipeline.runs.paths import check_home, default_home

    home = Path(args.home).absolute() if args.home else default_home()
    check_home(home, "--home" if args.home else "BENCH_HOME")
    return BenchPaths.from_home(home, args.warehouse)


def run_id_of(args: argparse.Namespace, paths: Any, suite: str | None = None) -> str:
    from bench_pipeline.runs.start import latest_run_id

    if getattr(args, "run", None):
        if not run_exists(paths.warehouse, args.run):
            raise CliError(
                f"run: no benchmark run '{args.run}' in {paths.warehouse.root}; see `bench results --list`"
            )
        return args.run
    rid = latest_run_id(paths.warehouse, suite)
    if rid is None:
        raise CliError(
            f"no benchmark run in {paths.warehouse.root} yet; start one with `bench run LAUNCH`"
        )
    return rid


def print_json(data: Any) -> None:
    print(json.dumps(data, indent=2, default=str))


def records(frame: Any) -> list[dict[str, Any]]:
    return json.loads(frame.to_json(orient="records", date_format="iso"))


def load_run_of(paths: BenchPaths, run_id: str) -> BenchmarkRun:
    return load_run(run_id, paths.warehouse)


def output_target(path: str | Path, flag: str) -> Path:
    """The file an output flag writes: `path`, or the file a symlink there names (the link
    stays a link). The file is replaced whole by a rename, so anything but a regular file
    (a device such as /dev/full, a pipe, a socket) is refused: root's rename would put a
    regular file in its place."""
    text = os.fspath(path)
    if text.endswith(os.sep):
        raise CliError(f"{flag}: {text} names a folder; give a file name")
    out = Path(text).absolute()
    if out.is_symlink():
        out = out.resolve()
    try:
        mode = out.stat().st_mode
    except FileNotFoundError:
        return out
    except OSError as exc:
        raise CliError(f"{flag}: cannot use {text} ({exc.strerror}); write elsewhere") from None
    if stat.S_ISDIR(mode):
        raise CliError(f"{flag}: {text} is a folder; give a file name")
    if not stat.S_ISREG(mode):
        raise CliError(
            f"{flag}: {text} is not a regular file (a device, a pipe or a socket); give a file name"
        )
    return out


def check_output_file(path: str | Path, flag: str) -> Path:
    """Refuse, before any work, an output file that could not be written at the end."""
    out = output_target(path, flag)
    parent = out.parent
    if not parent.is_dir():
        raise CliError(f"{flag}: folder {parent} does not exist; create it or write elsewhere")
    probe = parent / f".{out.name}.{os.getpid()}.probe"
    try:
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise CliError(
            f"{flag}: cannot write in {parent} ({exc.strerror}); write elsewhere"
        ) from None
    return out


def write_output_file(path: str | Path, text: str, flag: str = "--out") -> None:
    """Write a whole file or nothing: a reader never sees half a report."""
    replace_text(output_target(path, flag), text)
