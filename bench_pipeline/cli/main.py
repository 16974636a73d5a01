"""`bench`: the command line over the same use cases and Dagster definitions as the UI.

Exit codes: 0 success, 1 failed trials with --fail-on-error, a regression (or nothing
compared) with --fail-on-regression, or tasks failing validation; 2 bad input (one line naming
the file and the field).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable

from bench_pipeline.cli import (
    authoring,
    collector,
    common,
    grading,
    results,
    running,
    serve,
    ui,
)
from bench_pipeline.formats.errors import BenchInputError, RunFailed

COMMAND_GROUPS = (running, results, grading, authoring, ui, serve)
# Commands that turn the garbage collector back on themselves, once they have imported Dagster
# and opened the instance (`cli.collector`); every other one gets it back before it starts.
RESUME_THEMSELVES = frozenset({running.cmd_run, grading.cmd_rescore, serve.cmd_serve})

# The use cases name the field they refuse; the user typed a flag. (`runs.start.apply_overrides`,
# `runs.compare`, `runs.rescore.parse_scorers`, `authoring.from_commit`.)
FLAG_OF_FIELD = {
    "name": "--name",
    "max_tasks": "--max",
    "parallel": "--parallel",
    "timeout": "--timeout",
    "repetitions": "--repeats",
    "candidate": "--candidate",
    "against": "--against",
    "scorers": "--scorers",
    "suite": "--suite",
    "task_id": "--id",
}


def input_error_line(exc: BenchInputError) -> str:
    """The one line a bad input prints: file and key, with a use case's field shown as its flag."""
    if exc.file is None and exc.key in FLAG_OF_FIELD:
        return f"error: {FLAG_OF_FIELD[exc.key]}: {exc.problem}"
    return f"error: {exc}"


def command_help(fn: Callable[[argparse.Namespace], int]) -> str:
    """A command's help is its handler's docstring: "Check a factory." -> "check a factory"."""
    doc = " ".join((fn.__doc__ or "").split("\n\n")[0].split())
    return (doc[:1].lower() + doc[1:]).removesuffix(".")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="bench", description="Benchmark AI coding-agent configurations on your own tasks."
    )
    p.add_argument(
        "--home",
        help="state folder: evidence, warehouse, Dagster instance (default $BENCH_HOME or ./.bench)",
    )
    p.add_argument("--warehouse", help="warehouse root (default <home>/warehouse)")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def add(
        name: str, fn: Callable[[argparse.Namespace], int], help_: str | None = None
    ) -> argparse.ArgumentParser:
        help_ = help_ or command_help(fn)
        sp = sub.add_parser(name, help=help_, description=help_)
        sp.set_defaults(fn=fn)
        return sp

    for group in COMMAND_GROUPS:
        group.register(add)
    # The command line itself, for `bench serve` to run the commands handed to it (passed, not
    # imported there: this module imports every command module).
    p.set_defaults(run_command=main)
    return p


def _recover(args: argparse.Namespace) -> None:
    """Runs whose driving process died (kill -9, crash) are marked interrupted, their leftover
    process groups killed and their Dagster runs failed, whenever the tool next starts."""
    from bench_pipeline.runs.status import recover_interrupted

    paths = common.paths_of(args)
    interrupted = recover_interrupted(paths.warehouse, paths.home / "pids")
    if not interrupted:
        return
    from bench_pipeline.defs.launcher import fail_orphaned_runs, get_instance

    instance = get_instance(paths)
    for rid in interrupted:
        fail_orphaned_runs(instance, rid)
        print(
            f"run {rid} was interrupted (its process is gone); "
            f"finish it with `bench run --resume {rid}`",
            file=sys.stderr,
        )


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.fn not in RESUME_THEMSELVES:
        collector.resume()
    try:
        if args.command != "validate":
            _recover(args)
        return args.fn(args)
    except BenchInputError as exc:
        print(input_error_line(exc), file=sys.stderr)
        return common.EXIT_BAD_INPUT
    except (common.CliError, LookupError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return common.EXIT_BAD_INPUT
    except RunFailed as exc:  # a step's error: a file to mend (exit 2), or a fault (exit 1)
        print(f"error: {exc}", file=sys.stderr)
        return common.EXIT_BAD_INPUT if exc.bad_input else common.EXIT_FAILED
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return common.EXIT_INTERRUPTED
    except BrokenPipeError:
        # The reader went away (`bench results --json | head`): what it wanted it has. Point
        # stdout at /dev/null so the interpreter's final flush does not raise again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return common.EXIT_OK


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
