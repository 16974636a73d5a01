"""`bench`: the command line over the same pipeline and Dagster definitions as the UI.

Exit codes: 0 success, 1 failed trials with --fail-on-error (or tasks failing validation),
2 bad input (one line naming the file and the field).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench_pipeline.formats.errors import BenchInputError

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT = 0, 1, 2


class CliError(Exception):
    """A usage problem found by a command (exit 2)."""


# --------------------------------------------------------------------------- shared helpers


def _paths(args: argparse.Namespace):
    from bench_pipeline.pipeline import BenchPaths, default_home

    home = Path(args.home).absolute() if args.home else default_home()
    return BenchPaths.from_home(home, args.warehouse)


def _run_id(args: argparse.Namespace, paths: Any, suite: str | None = None) -> str:
    from bench_pipeline.pipeline import latest_run_id

    if getattr(args, "run", None):
        if not paths.warehouse.exists(f"manifests/{args.run}.json"):
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


def _print_json(data: Any) -> None:
    print(json.dumps(data, indent=2, default=str))


def _records(frame: Any) -> list[dict[str, Any]]:
    return json.loads(frame.to_json(orient="records", date_format="iso"))


# --------------------------------------------------------------------------- validate


def cmd_validate(args: argparse.Namespace) -> int:
    from bench_pipeline.formats.taskset import freeze
    from bench_pipeline.validation import validate_reference
    from bench_pipeline.validation_factory import load_factory

    factory = load_factory(Path(args.path))
    for launch_name, launch in factory.launches.items():
        print(
            f"ok  launch {launch_name}: {launch.trial_count} trials ({len(launch.tasks)} tasks x {len(launch.configs)} configs x {launch.repetitions} reps)"
        )
    for suite, tasks in factory.suites:
        print(f"ok  suite {suite.name}: {len(tasks)} tasks")
    if not args.reference:
        return EXIT_OK
    failed = 0
    for suite, tasks in factory.suites:
        taskset = freeze(suite.name, suite.directory, tuple(tasks))
        for v in validate_reference(taskset, suite.directory, args.parallel):
            base = " ".join(f"{k}={s}" for k, s in v.base.items())
            ref = " ".join(f"{k}={s}" for k, s in v.reference.items())
            if v.ok:
                print(f"ok    {suite.name}/{v.task_id}: base [{base}] -> reference [{ref}]")
            else:
                failed += 1
                print(f"FAIL  {suite.name}/{v.task_id}: {'; '.join(v.problems)}")
    if failed:
        print(f"{failed} task(s) failed reference validation", file=sys.stderr)
        return EXIT_FAILED
    print("every task fails on its base and passes with its reference")
    return EXIT_OK


# --------------------------------------------------------------------------- estimate, run


def _overrides(args: argparse.Namespace) -> dict[str, Any]:
    return {
        "name": args.name,
        "max_tasks": args.max,
        "repeats": args.repeats,
        "parallel": args.parallel,
        "timeout": args.timeout,
    }


def cmd_estimate(args: argparse.Namespace) -> int:
    from bench_pipeline.estimate import estimate_launch, render_estimate
    from bench_pipeline.pipeline import apply_overrides, load_and_check

    launch, prices = load_and_check(args.launch)
    launch = apply_overrides(launch, **_overrides(args))
    est = estimate_launch(launch, prices, _paths(args).warehouse)
    if args.json:
        _print_json(est)
    else:
        print(render_estimate(est))
    return EXIT_OK


def cmd_run(args: argparse.Namespace) -> int:
    from bench_pipeline.benchmark_run import agent_drift, load_run
    from bench_pipeline.defs.launcher import execute_run, get_instance
    from bench_pipeline.estimate import estimate_launch
    from bench_pipeline.pipeline import apply_overrides, load_and_check, start_run
    from bench_pipeline.runstate import mark_finished, mark_running

    paths = _paths(args)
    if args.resume:
        if not paths.warehouse.exists(f"manifests/{args.resume}.json"):
            raise CliError(f"--resume: no benchmark run '{args.resume}' in {paths.warehouse.root}")
        run = load_run(args.resume, paths.warehouse)
        paths.cancel_flag(run.run_id).unlink(missing_ok=True)
        print(f"resuming {run.run_id}: only trials without a final result run", file=sys.stderr)
    else:
        if not args.launch:
            raise CliError("run: give a launch file (or --resume RUN)")
        launch, prices = load_and_check(args.launch)
        launch = apply_overrides(launch, **_overrides(args))
        if args.max_cost is not None:
            est = estimate_launch(launch, prices, paths.warehouse)
            cap = est["cost_cap_usd"]
            if cap is None or cap > args.max_cost:
                shown = "unbounded (a config has no budget_usd)" if cap is None else f"${cap:.2f}"
                if not args.yes:
                    raise CliError(
                        f"--max-cost: the launch's cost cap is {shown}, above ${args.max_cost:.2f}; add --yes to run anyway"
                    )
        run = start_run(args.launch, paths, overrides=_overrides(args))
    total = len(run.taskset.tasks) * len(run.launch.configs) * run.launch.repetitions
    print(f"run {run.run_id}: {total} trials, task set {run.taskset.revision}", file=sys.stderr)
    instance = get_instance(paths)
    mark_running(paths.warehouse, run.run_id)
    status = "failed"
    try:
        execute_run(
            run,
            paths,
            instance,
            progress=not args.quiet,
            on_partition=None
            if args.quiet
            else lambda c, r: print(f"partition {c} rep {r}", file=sys.stderr),
        )
        status = "cancelled" if paths.cancel_flag(run.run_id).exists() else "finished"
    finally:
        # Agent files that changed while the run was in progress: the results say so.
        mark_finished(paths.warehouse, run.run_id, status, agent_drift=agent_drift(run))
    return _show_results(args, paths, run.run_id, fail_on_error=args.fail_on_error)


# --------------------------------------------------------------------------- results


def _show_results(
    args: argparse.Namespace, paths: Any, run_id: str, fail_on_error: bool = False
) -> int:
    from bench_pipeline.cli.format import render_config_table, render_recommendations
    from bench_pipeline.derived import compute_derived, load_derived
    from bench_pipeline.tables import FAILED_OUTCOMES

    baseline = getattr(args, "baseline", None)
    derived = load_derived(paths.warehouse, run_id) if baseline is None else None
    if derived is None:
        derived = compute_derived(
            paths.warehouse,
            run_id,
            baseline_run_id=None if baseline in (None, "none") else baseline,
            use_pinned_baseline=baseline != "none",
        )
    table = derived.tables["config_table"]
    trials = paths.warehouse.read("trials", run_id)
    failed = trials[trials["outcome"].isin(FAILED_OUTCOMES)]
    out_file = getattr(args, "out", None)
    payload = {
        "run": derived.meta(),
        "config_table": _records(table),
        "recommendations": derived.recommendations,
    }
    if getattr(args, "by_tag", False):
        payload["by_tag"] = _records(derived.tables["config_table_by_tag"])
        payload["recommendations_by_tag"] = _records(derived.tables["recommendations_by_tag"])
    if out_file:
        Path(out_file).write_text(json.dumps(payload, indent=2, default=str))
    if getattr(args, "json", False):
        _print_json(payload)
    else:
        meta = derived.meta()
        print(
            f"\nRun {run_id}  suite {meta['suite']}  task set {meta['task_set_revision']}  baseline {meta['baseline_run']}"
        )
        for note in derived.notes:
            print(f"note: {note}")
        print()
        print(render_config_table(table))
        print("\nRecommendations:")
        print(render_recommendations(derived.recommendations))
        if getattr(args, "by_tag", False):
            print()
            for tag, part in derived.tables["config_table_by_tag"].groupby("tag", sort=True):
                print(f"\nTag {tag}:")
                print(render_config_table(part))
        print(f"\nQuery it: duckdb {paths.warehouse.duckdb_path}")
    if fail_on_error and len(failed):
        print(f"{len(failed)} trial(s) failed (agent error, timeout or budget)", file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK


def cmd_results(args: argparse.Namespace) -> int:
    paths = _paths(args)
    if args.list:
        runs = paths.warehouse.read_runs().sort_values("created_at")
        from bench_pipeline.runstate import run_statuses

        statuses = run_statuses(paths.warehouse)
        for r in runs.itertuples():
            print(
                f"{r.run_id}  {r.suite}  {r.launch}  {r.created_at}  task set {r.task_set_revision}  {statuses.get(r.run_id, 'unknown')}"
            )
        return EXIT_OK
    return _show_results(args, paths, _run_id(args, paths), fail_on_error=args.fail_on_error)


def cmd_report(args: argparse.Namespace) -> int:
    from bench_pipeline.derived import compute_derived
    from bench_pipeline.results import render_report_html

    paths = _paths(args)
    run_id = _run_id(args, paths)
    d = compute_derived(paths.warehouse, run_id)
    html = render_report_html(
        d.meta(),
        d.tables["config_table"],
        d.tables["task_grid"],
        d.recommendations,
        d.tables["pareto_frontier"],
        d.chart_svg(),
        by_tag=d.tables["config_table_by_tag"],
        comparison=d.tables["paired_comparison"],
    )
    out = Path(args.out or f"{run_id}-report.html")
    out.write_text(html, encoding="utf-8")
    print(out)
    return EXIT_OK


def cmd_baseline(args: argparse.Namespace) -> int:
    from bench_pipeline.benchmark_run import load_run
    from bench_pipeline.derived import pin_baseline, pinned_baseline

    paths = _paths(args)
    if args.action == "show":
        print(pinned_baseline(paths.warehouse, args.suite) or "none")
        return EXIT_OK
    if not args.run_id:
        raise CliError("baseline set: give SUITE RUN")
    if not paths.warehouse.exists(f"manifests/{args.run_id}.json"):
        raise CliError(f"baseline: no benchmark run '{args.run_id}'")
    run = load_run(args.run_id, paths.warehouse)
    if run.suite != args.suite:
        raise CliError(f"baseline: run {args.run_id} is of suite '{run.suite}', not '{args.suite}'")
    pin_baseline(paths.warehouse, args.suite, args.run_id)
    print(f"baseline of {args.suite} is now {args.run_id}")
    return EXIT_OK


def cmd_compare(args: argparse.Namespace) -> int:
    from bench_pipeline.comparison import compare_command

    paths = _paths(args)
    run_id = _run_id(args, paths)
    result = compare_command(paths.warehouse, run_id, args.against, args.candidate)
    if args.json:
        _print_json(result)
    else:
        from bench_pipeline.comparison import render_comparison

        print(render_comparison(result))
    return EXIT_OK


def cmd_ui(args: argparse.Namespace) -> int:
    from bench_pipeline.defs.launcher import ensure_dagster_home

    paths = _paths(args)
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
    return EXIT_OK  # pragma: no cover - exec does not return


# --------------------------------------------------------------------------- parser


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
        name: str, fn: Callable[[argparse.Namespace], int], help_: str
    ) -> argparse.ArgumentParser:
        sp = sub.add_parser(name, help=help_, description=help_)
        sp.set_defaults(fn=fn)
        return sp

    v = add(
        "validate",
        cmd_validate,
        "check a factory (or one launch) and, with --reference, every task against its reference patch",
    )
    v.add_argument("path", nargs="?", default=".", help="factory folder or launch file (default .)")
    v.add_argument(
        "--reference",
        action="store_true",
        help="each task must fail on its base and pass with its reference patch",
    )
    v.add_argument("--parallel", type=int, default=2, help="tasks validated at once (default 2)")

    def narrowing(sp: argparse.ArgumentParser) -> None:
        sp.add_argument(
            "--name", help="only tasks whose id or title contains PATTERN ('a|b' for either)"
        )
        sp.add_argument("--max", type=int, help="at most N tasks")
        sp.add_argument("--repeats", type=int, help="override the launch's repetitions")
        sp.add_argument("--parallel", type=int, help="concurrent trials per configuration")
        sp.add_argument("--timeout", type=float, help="override every config's timeout_seconds")

    e = add(
        "estimate",
        cmd_estimate,
        "trial count, cost cap and forecast of a launch, before running it",
    )
    e.add_argument("launch")
    narrowing(e)
    e.add_argument("--json", action="store_true")

    r = add("run", cmd_run, "run a launch through the Dagster definitions and print its results")
    r.add_argument("launch", nargs="?")
    narrowing(r)
    r.add_argument(
        "--resume", metavar="RUN", help="finish the trials of RUN that have no final result"
    )
    r.add_argument("--out", help="also write the results as JSON to this file")
    r.add_argument("--fail-on-error", action="store_true", help="exit 1 when any trial failed")
    r.add_argument(
        "--max-cost", type=float, help="refuse a launch whose cost cap exceeds this (USD)"
    )
    r.add_argument("--yes", action="store_true", help="run even above --max-cost")
    r.add_argument("--quiet", action="store_true", help="no progress lines")
    r.add_argument("--json", action="store_true", help="print the results as JSON")

    res = add(
        "results",
        cmd_results,
        "the config table and recommendations of a run (default: the latest)",
    )
    res.add_argument("run", nargs="?")
    res.add_argument("--json", action="store_true")
    res.add_argument("--by-tag", action="store_true")
    res.add_argument(
        "--baseline",
        help="compare with this run instead of the pinned baseline ('none' for no baseline)",
    )
    res.add_argument("--list", action="store_true", help="list every run in the warehouse")
    res.add_argument("--out", help="also write the results as JSON to this file")
    res.add_argument("--fail-on-error", action="store_true", help="exit 1 when any trial failed")

    rep = add("report", cmd_report, "write a self-contained HTML report of a run")
    rep.add_argument("run", nargs="?")
    rep.add_argument("--out", help="file to write (default <run>-report.html)")

    b = add("baseline", cmd_baseline, "pin (set) or show a suite's baseline run")
    b.add_argument("action", choices=["set", "show"])
    b.add_argument("suite")
    b.add_argument("run_id", nargs="?", metavar="RUN")

    c = add(
        "compare",
        cmd_compare,
        "paired comparison of a run's configs against a config or another run",
    )
    c.add_argument("run", nargs="?")
    c.add_argument(
        "--against",
        help="baseline: a config id of the run, or another run id (default: the baseline config)",
    )
    c.add_argument("--candidate", help="only this config")
    c.add_argument("--json", action="store_true")

    u = add("ui", cmd_ui, "start `dagster dev` on this project's definitions and instance")
    u.add_argument("--port", type=int, default=3000)
    _add_extensions(sub, add)
    return p


def _add_extensions(sub: Any, add: Callable[..., argparse.ArgumentParser]) -> None:
    """Commands implemented in their own modules (kept out of this file's way)."""
    from bench_pipeline.cli import extra

    extra.register(add)


def _recover(args: argparse.Namespace) -> None:
    """Runs whose driving process died (kill -9, crash) are marked interrupted, their leftover
    process groups killed and their Dagster runs failed, whenever the tool next starts."""
    from bench_pipeline.runstate import recover_interrupted

    paths = _paths(args)
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
    try:
        if args.command != "validate":
            _recover(args)
        return args.fn(args)
    except BenchInputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except (CliError, LookupError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
