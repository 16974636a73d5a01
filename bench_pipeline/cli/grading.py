"""`bench rescore`, `calibrate-judge`: grade finished runs again, check the judge."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from bench_pipeline.cli import collector, common


def cmd_rescore(args: argparse.Namespace) -> int:
    """Grade a finished run again without rerunning agents (default: only unscored cells)."""

    from datetime import UTC, datetime

    from bench_pipeline.cli.results import show_results
    from bench_pipeline.defs.launcher import build_results, get_instance
    from bench_pipeline.defs.rescore import execute_rescore
    from bench_pipeline.formats.serialize import to_jsonable
    from bench_pipeline.runs import rescore as rs
    from bench_pipeline.runs.status import RUNNING, recover_interrupted, status_of

    paths = common.paths_of(args)
    run_id = common.run_id_of(args, paths)
    recover_interrupted(paths.warehouse)
    if (status_of(paths.warehouse, run_id) or {}).get("status") == RUNNING:
        raise common.CliError(
            f"run {run_id} is still running; rescore it when it ends (or `bench cancel`)"
        )
    run = common.load_run_of(paths, run_id)
    if not paths.warehouse.files("trials", run_id):  # (nothing to grade: before Dagster starts)
        raise common.CliError(
            f"run {run_id} has no trials yet: nothing to rescore; finish it with "
            f"`bench run --resume {run_id}`"
        )
    scorers = rs.parse_scorers(args.scorers)
    judge = rs.effective_judge(paths.warehouse, run)
    judge_changed = judge != run.launch.judge
    added: list[str] = []
    changed: list[str] = []
    if args.criteria:
        updates = rs.load_criteria(args.criteria)
        judge, added, changed = rs.merge_criteria(judge, updates, args.criteria)
        judge_changed = judge_changed or bool(added or changed)
        if scorers is None:
            scorers = ["llm_judge"]
        elif "llm_judge" not in scorers:
            raise common.CliError(
                "--criteria: the criteria are graded by llm_judge; add it to --scorers"
            )
    specs = scorers or list(run.launch.scorers)
    rs.preflight(run, specs, judge, dict(os.environ))
    instance = get_instance(paths)  # (before the rescore's settings are saved: see cmd_run)
    rescore_id = rs.new_rescore_id()
    settings = {
        "run_id": run_id,
        "rescore_id": rescore_id,
        "started_at": datetime.now(UTC).isoformat(),
        "scorers": specs,
        "only_unscored": not args.all,
        "criteria_file": str(Path(args.criteria).absolute()) if args.criteria else None,
        "criteria_added": added,
        "criteria_changed": changed,
        "judge_changed": judge_changed,
        "judge": to_jsonable(judge),
    }
    rs.save_settings(paths.warehouse, run_id, rescore_id, settings)
    mode = "every cell" if args.all else "only unscored cells (missing or error)"
    print(f"rescore {rescore_id} of {run_id}: {', '.join(specs)}; {mode}", file=sys.stderr)
    if changed and not args.all:
        print(
            f"note: criteria {', '.join(changed)} changed; cells they already scored keep their "
            "grades (use --all to regrade them)",
            file=sys.stderr,
        )
    collector.resume()  # Dagster imported, its instance open: the grading's garbage is collected
    rows = execute_rescore(
        run,
        paths,
        instance,
        scorers=scorers,
        rescore_id=rescore_id,
        only_unscored=not args.all,
        judge=judge if judge_changed else None,
        on_partition=None
        if args.quiet
        else lambda c, r: print(f"partition {c} rep {r}", file=sys.stderr),
    )
    summary = rs.summarize(rows)
    settings.update(finished_at=datetime.now(UTC).isoformat(), rows=len(rows), summary=summary)
    rs.save_settings(paths.warehouse, run_id, rescore_id, settings)
    build_results(run_id, paths, instance)
    if args.json:
        common.print_json(settings)
        return common.EXIT_OK
    print(f"rescore {rescore_id}: {len(rows)} new score row(s)")
    for scorer, statuses in summary.items():
        print(f"  {scorer:<28} " + ", ".join(f"{s} {n}" for s, n in sorted(statuses.items())))
    return show_results(args, paths, run_id)


def cmd_calibrate(args: argparse.Namespace) -> int:
    """Agreement of the judge with human labels (accuracy, Cohen's kappa, confusion)."""

    from bench_pipeline.formats.loader import load_launch, load_prices
    from bench_pipeline.formats.model import Judge, Prices
    from bench_pipeline.formats.refs import FactoryView
    from bench_pipeline.runs.calibration import judge_config_hash, record_calibration
    from bench_pipeline.scorers.calibrate import calibrate_judge, format_report

    prices = Prices({})
    judge = Judge()
    if args.launch:
        launch = load_launch(args.launch)
        judge = launch.judge or Judge()
        prices = load_prices(FactoryView(launch.factory_root))
    elif args.factory:
        prices = load_prices(FactoryView(Path(args.factory).absolute()))
    from dataclasses import replace

    overrides = {
        "model": args.model,
        "effort": args.effort,
        "base_url": args.base_url,
        "api_key_env": args.api_key_env,
    }
    judge = replace(judge, **{k: v for k, v in overrides.items() if v is not None})
    if args.rubric and not Path(args.rubric).is_file():
        raise common.CliError(f"--rubric: {args.rubric} is not a file")
    report = calibrate_judge(args.rubric, args.dataset, judge, dict(os.environ), prices)
    record = record_calibration(
        common.paths_of(args).warehouse, judge, report, rubric=args.rubric, dataset=args.dataset
    )
    if args.json:
        common.print_json({**report, "judge_config_hash": record["judge_config_hash"]})
    else:
        print(format_report(report))
        print(f"recorded as calibration of judge configuration {judge_config_hash(judge)}")
    return common.EXIT_OK


def register(add: common.AddCommand) -> None:
    r = add("rescore", cmd_rescore)
    r.add_argument("run", nargs="?", help="benchmark run (default: the latest)")
    r.add_argument(
        "--scorers", help="comma-separated scorers instead of the launch's (adds new ones)"
    )
    r.add_argument(
        "--criteria", help="JSON or YAML file of judge criteria {id, weight, prompt}, merged by id"
    )
    r.add_argument("--all", action="store_true", help="regrade every cell, not only unscored ones")
    r.add_argument("--quiet", action="store_true", help="no progress lines")
    r.add_argument("--json", action="store_true", help="print the rescore record as JSON")

    c = add("calibrate-judge", cmd_calibrate)
    c.add_argument("--rubric", help="grading guidance file appended to the rubric prompt")
    c.add_argument("--dataset", required=True, help="labelled items JSON (see data/calibration)")
    c.add_argument("--launch", help="take the judge (and prices) from this launch's judge block")
    c.add_argument("--factory", help="factory whose prices.yaml prices the judge calls")
    c.add_argument("--model", help="judge model (default: the launch's, else claude-sonnet-4-5)")
    c.add_argument("--effort", choices=["low", "medium", "high"])
    c.add_argument("--base-url", help="Messages API base URL (a proxy or test server)")
    c.add_argument("--api-key-env", help="variable holding the API key (default ANTHROPIC_API_KEY)")
    c.add_argument("--json", action="store_true")
