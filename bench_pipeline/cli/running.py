"""`bench validate`, `estimate`, `run`, `cancel`: check a factory, then run a launch."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from bench_pipeline.cli import collector, common
from bench_pipeline.formats.errors import RunFailed
from bench_pipeline.formats.model import MAX_PARALLEL
from bench_pipeline.runs.benchmark_run import run_exists

MAX_VALIDATE_REPEAT = 20


def cmd_validate(args: argparse.Namespace) -> int:
    """Check a factory (or one launch) and, with --reference, every task against its reference patch."""

    from bench_pipeline.formats.factory import load_factory
    from bench_pipeline.formats.taskset import freeze
    from bench_pipeline.runs.start import check_scorer_files, check_tasks_fit_agents
    from bench_pipeline.trials.reference import reference_apply_problem, validate_reference

    if args.repeat < 1 or args.repeat > MAX_VALIDATE_REPEAT:
        raise common.CliError(f"--repeat: give 1 to {MAX_VALIDATE_REPEAT} runs per phase")
    if not 1 <= args.parallel <= MAX_PARALLEL:
        raise common.CliError(f"--parallel: give 1 to {MAX_PARALLEL} tasks at once")
    if args.repeat > 1 and not args.reference:
        raise common.CliError("--repeat: only with --reference (it repeats the reference runs)")
    common.paths_of(args)  # a run would fail on a state folder it cannot write: say so now
    factory = load_factory(Path(args.path))
    for launch_name, launch in factory.launches.items():
        check_tasks_fit_agents(launch)
        check_scorer_files(launch)
        print(
            f"ok  launch {launch_name}: {launch.trial_count} trials ({len(launch.tasks)} tasks x "
            f"{len(launch.configs) + launch.adds_original_config} configs x {launch.repetitions} reps)"
        )
    broken = 0
    for suite, tasks in factory.suites:
        problems = [(t.id, reference_apply_problem(t, suite.directory)) for t in tasks]
        problems = [(tid, why) for tid, why in problems if why]
        for tid, why in problems:
            print(f"FAIL  {suite.name}/{tid}: {why}")
        broken += len(problems)
        if not problems:
            print(f"ok  suite {suite.name}: {len(tasks)} tasks")
    if broken:
        print(f"{broken} task(s) have a reference that does not apply", file=sys.stderr)
        return common.EXIT_FAILED
    if not args.reference:
        return common.EXIT_OK
    failed = 0
    for suite, tasks in factory.suites:
        taskset = freeze(suite.name, suite.directory, tuple(tasks))
        results = validate_reference(
            taskset, suite.directory, args.parallel, args.repeat, suite.prepare_commands
        )
        for v in results:
            base = " ".join(f"{k}={s}" for k, s in v.base.items())
            ref = " ".join(f"{k}={s}" for k, s in v.reference.items())
            spec = taskset.task(v.task_id).tests
            tests = f" ({v.tests_summary(spec)})" if spec is not None else ""
            if v.ok:
                print(f"ok    {suite.name}/{v.task_id}: base [{base}] -> reference [{ref}]{tests}")
            else:
                failed += 1
                print(f"FAIL  {suite.name}/{v.task_id}: {'; '.join(v.problems)}")
            if v.flaky:
                print(
                    f"      flaky over {v.repeat} runs (not graded; list them in tests.flaky): "
                    + ", ".join(v.flaky)
                )
    if failed:
        print(f"{failed} task(s) failed reference validation", file=sys.stderr)
        return common.EXIT_FAILED
    print("every task fails on its base and passes with its reference")
    return common.EXIT_OK


def _overrides(args: argparse.Namespace) -> dict[str, Any]:
    return {
        "name": args.name,
        "max_tasks": args.max,
        "repeats": args.repeats,
        "parallel": args.parallel,
        "timeout": args.timeout,
    }


def non_negative_usd(text: str) -> float:
    """An amount of dollars for --max-cost: a number >= 0 (argparse shows the error, exit 2)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a number of dollars") from None
    if not value >= 0:  # also refuses nan
        raise argparse.ArgumentTypeError(f"{text} is not a cost: give 0 or more dollars")
    return value


def narrowing(sp: argparse.ArgumentParser) -> None:
    sp.add_argument(
        "--name", help="only tasks whose id or title contains PATTERN ('a|b' for either)"
    )
    sp.add_argument("--max", type=int, help="at most N tasks")
    sp.add_argument("--repeats", type=int, help="override the launch's repetitions")
    sp.add_argument("--parallel", type=int, help="concurrent trials per configuration")
    sp.add_argument("--timeout", type=float, help="override every config's timeout_seconds")


def cmd_estimate(args: argparse.Namespace) -> int:
    """Trial count, cost cap and forecast of a launch, before running it."""

    from bench_pipeline.cli.format import render_estimate
    from bench_pipeline.runs.estimate import estimate_launch
    from bench_pipeline.runs.start import apply_overrides, load_and_check

    launch, prices = load_and_check(args.launch)
    launch = apply_overrides(launch, **_overrides(args))
    if not 0 < args.detect <= 1:
        raise common.CliError(
            f"--detect: {args.detect:g} must be a difference in overall in (0, 1]"
        )
    est = estimate_launch(launch, prices, common.paths_of(args).warehouse, detect=args.detect)
    if args.json:
        common.print_json(est)
    else:
        print(render_estimate(est))
    return common.EXIT_OK


def cmd_run(args: argparse.Namespace) -> int:
    """Run a launch through the Dagster definitions and print its results."""

    from bench_pipeline.cli.results import show_results
    from bench_pipeline.defs.launcher import execute_run, get_instance
    from bench_pipeline.runs.benchmark_run import agent_drift, load_run
    from bench_pipeline.runs.start import (
        apply_overrides,
        isolation_warnings,
        load_and_check,
        start_run,
    )
    from bench_pipeline.runs.status import mark_finished, mark_running

    paths = common.paths_of(args)
    if args.out:
        common.check_output_file(args.out, "--out")
    if args.resume:
        if not run_exists(paths.warehouse, args.resume):
            raise common.CliError(
                f"--resume: no benchmark run '{args.resume}' in {paths.warehouse.root}"
            )
        run = load_run(args.resume, paths.warehouse)
        instance = get_instance(paths)
        paths.cancel_flag(run.run_id).unlink(missing_ok=True)
        print(f"resuming {run.run_id}: only trials without a final result run", file=sys.stderr)
    else:
        if not args.launch:
            raise common.CliError("run: give a launch file (or --resume RUN)")
        loaded = load_and_check(args.launch)
        launch, prices = loaded
        launch = apply_overrides(launch, **_overrides(args))
        if args.max_cost is not None:
            from bench_pipeline.runs.estimate import estimate_launch  # pandas: only with a cap

            est = estimate_launch(launch, prices, paths.warehouse)
            cap = est["cost_cap_usd"]
            if cap is None or cap > args.max_cost:
                shown = "unbounded (a config has no budget_usd)" if cap is None else f"${cap:.2f}"
                if not args.yes:
                    raise common.CliError(
                        f"--max-cost: the launch's cost cap is {shown}, above ${args.max_cost:.2f}; add --yes to run anyway"
                    )
        # (the instance before the run is saved: a dagster.yaml it cannot use leaves no run)
        instance = get_instance(paths)
        run = start_run(args.launch, paths, overrides=_overrides(args), checked=loaded)
    total = len(run.taskset.tasks) * len(run.launch.configs) * run.repetitions
    plan = run.launch.adaptive
    shown = (
        f"{total} trials"
        if plan is None
        else f"{total} trials in {run.repetitions} rounds, up to {plan.max} (adaptive)"
    )
    print(f"run {run.run_id}: {shown}, task set {run.taskset.revision}", file=sys.stderr)
    for warning in isolation_warnings(run):
        print(warning, file=sys.stderr)
    collector.resume()  # Dagster imported, its instance open: the trials' garbage is collected
    mark_running(paths.warehouse, run.run_id)
    status = "failed"
    try:
        execute_run(run, paths, instance, progress=not args.quiet)
        status = "cancelled" if paths.cancel_flag(run.run_id).exists() else "finished"
    except KeyboardInterrupt:
        status = "interrupted"
        print(
            f"run {run.run_id} interrupted; finish it with `bench run --resume {run.run_id}`",
            file=sys.stderr,
        )
        return common.EXIT_INTERRUPTED
    except RunFailed as exc:
        mended = f"{exc}; once that is mended, `bench run --resume {run.run_id}`"
        raise RunFailed(mended, exc.bad_input) from None
    finally:
        # Agent files that changed while the run was in progress: the results say so.
        mark_finished(paths.warehouse, run.run_id, status, agent_drift=agent_drift(run))
    return show_results(
        args,
        paths,
        run.run_id,
        fail_on_error=args.fail_on_error,
        fail_on_regression=args.fail_on_regression,
    )


def cmd_cancel(args: argparse.Namespace) -> int:
    """Stop a running benchmark run; finished trials are kept."""

    from bench_pipeline.cli.format import render_cancel
    from bench_pipeline.runs.cancel import cancel_run
    from bench_pipeline.runs.status import RUNNING, status_of

    paths = common.paths_of(args)
    if not run_exists(paths.warehouse, args.run):
        raise common.CliError(f"RUN: no benchmark run '{args.run}' in {paths.warehouse.root}")
    status = (status_of(paths.warehouse, args.run) or {}).get("status")
    if status != RUNNING:
        print(f"run {args.run} is not running (status {status or 'unknown'}); nothing to cancel")
        return common.EXIT_OK
    print(f"cancelling {args.run} ...", file=sys.stderr)
    report = cancel_run(paths.warehouse, paths.cancel_flag(args.run), args.run, args.wait)
    if args.json:
        common.print_json(report.__dict__)
    else:
        print(render_cancel(report))
    if not report.stopped:
        print(
            f"still running after {args.wait:g} s; the cancel flag stays, so its trials stop "
            "at their next check",
            file=sys.stderr,
        )
        return common.EXIT_FAILED
    print(f"resume it with `bench run --resume {args.run}`", file=sys.stderr)
    return common.EXIT_OK


def register(add: common.AddCommand) -> None:
    v = add("validate", cmd_validate)
    v.add_argument("path", nargs="?", default=".", help="factory folder or launch file (default .)")
    v.add_argument(
        "--reference",
        action="store_true",
        help="each task must fail on its base and pass with its reference patch",
    )
    v.add_argument("--parallel", type=int, default=2, help="tasks validated at once (default 2)")
    v.add_argument(
        "--repeat",
        type=int,
        default=1,
        metavar="K",
        help="with --reference: run each phase K times; tests with mixed outcomes are flaky",
    )

    e = add("estimate", cmd_estimate)
    e.add_argument("launch")
    narrowing(e)
    e.add_argument(
        "--detect",
        type=float,
        default=0.05,
        metavar="DELTA",
        help="difference in overall the power figure is for (default 0.05)",
    )
    e.add_argument("--json", action="store_true")

    r = add("run", cmd_run)
    r.add_argument("launch", nargs="?")
    narrowing(r)
    r.add_argument(
        "--resume", metavar="RUN", help="finish the trials of RUN that have no final result"
    )
    r.add_argument("--out", help="also write the results as JSON to this file")
    r.add_argument("--fail-on-error", action="store_true", help="exit 1 when any trial failed")
    r.add_argument(
        "--fail-on-regression",
        action="store_true",
        help="exit 1 when a config regressed against the pinned baseline, or nothing was compared",
    )
    r.add_argument(
        "--max-cost",
        type=non_negative_usd,
        help="refuse a launch whose cost cap exceeds this (USD)",
    )
    r.add_argument("--yes", action="store_true", help="run even above --max-cost")
    r.add_argument("--quiet", action="store_true", help="no progress lines")
    r.add_argument("--json", action="store_true", help="print the results as JSON")

    x = add("cancel", cmd_cancel)
    x.add_argument("run", metavar="RUN")
    x.add_argument("--wait", type=float, default=120.0, help="seconds to wait for it to stop")
    x.add_argument("--json", action="store_true")
