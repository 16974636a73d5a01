"""Commands beyond the core loop, each small and in one place: registered on the parser.

rescore, calibrate-judge, promote, import, tasks from-commit, cancel. The work lives in
`bench_pipeline.{rescore,promote,importer,from_commit,cancel}`; these are thin wrappers.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench_pipeline.cli.main import EXIT_FAILED, EXIT_OK, CliError, _paths, _print_json, _run_id


def _load_run(paths: Any, run_id: str):
    from bench_pipeline.benchmark_run import load_run

    return load_run(run_id, paths.warehouse)


# --------------------------------------------------------------------------- rescore


def cmd_rescore(args: argparse.Namespace) -> int:
    from datetime import UTC, datetime

    from bench_pipeline import rescore as rs
    from bench_pipeline.cli.main import _show_results
    from bench_pipeline.defs.launcher import build_results, get_instance
    from bench_pipeline.formats.serialize import to_jsonable
    from bench_pipeline.runstate import RUNNING, recover_interrupted, status_of

    paths = _paths(args)
    run_id = _run_id(args, paths)
    recover_interrupted(paths.warehouse)
    if (status_of(paths.warehouse, run_id) or {}).get("status") == RUNNING:
        raise CliError(
            f"run {run_id} is still running; rescore it when it ends (or `bench cancel`)"
        )
    run = _load_run(paths, run_id)
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
            raise CliError("--criteria: the criteria are graded by llm_judge; add it to --scorers")
    specs = scorers or list(run.launch.scorers)
    rs.preflight(run, specs, judge, dict(os.environ))
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
    instance = get_instance(paths)
    rows = rs.execute_rescore(
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
        _print_json(settings)
        return EXIT_OK
    print(f"rescore {rescore_id}: {len(rows)} new score row(s)")
    for scorer, statuses in summary.items():
        print(f"  {scorer:<28} " + ", ".join(f"{s} {n}" for s, n in sorted(statuses.items())))
    return _show_results(args, paths, run_id)


# --------------------------------------------------------------------------- calibrate-judge


def cmd_calibrate(args: argparse.Namespace) -> int:
    from bench_pipeline.formats.loader import load_launch, load_prices
    from bench_pipeline.formats.model import Judge, Prices
    from bench_pipeline.formats.refs import FactoryView
    from bench_pipeline.rescore import judge_config_hash, record_calibration
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
        raise CliError(f"--rubric: {args.rubric} is not a file")
    report = calibrate_judge(args.rubric, args.dataset, judge, dict(os.environ), prices)
    record = record_calibration(
        _paths(args).warehouse, judge, report, rubric=args.rubric, dataset=args.dataset
    )
    if args.json:
        _print_json({**report, "judge_config_hash": record["judge_config_hash"]})
    else:
        print(format_report(report))
        print(f"recorded as calibration of judge configuration {judge_config_hash(judge)}")
    return EXIT_OK


# --------------------------------------------------------------------------- promote


def cmd_promote(args: argparse.Namespace) -> int:
    from bench_pipeline.cli.main import _records
    from bench_pipeline.derived import compute_derived
    from bench_pipeline.promote import check_promotable, promote

    paths = _paths(args)
    if not paths.warehouse.exists(f"manifests/{args.run}.json"):
        raise CliError(f"RUN: no benchmark run '{args.run}' in {paths.warehouse.root}")
    run = _load_run(paths, args.run)
    check_promotable(run, args.config)
    derived = compute_derived(paths.warehouse, args.run)
    rows = [r for r in _records(derived.tables["config_table"]) if r["config_id"] == args.config]
    if not rows:
        raise CliError(f"CONFIG: run {args.run} has no results for '{args.config}'")
    tag_row = None
    if args.tag:
        by_tag = _records(derived.tables["config_table_by_tag"])
        tag_rows = [r for r in by_tag if r["config_id"] == args.config and r["tag"] == args.tag]
        if not tag_rows:
            tags = sorted({str(r["tag"]) for r in by_tag})
            raise CliError(
                f"--tag: no tag '{args.tag}' in run {args.run} (tags: {', '.join(tags)})"
            )
        tag_row = tag_rows[0]
    try:
        result = promote(run, args.config, rows[0], tag=args.tag, tag_row=tag_row)
    except RuntimeError as exc:  # pushing or the pull request failed; the branch exists
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_FAILED
    print(f"branch {result.branch} ({result.commit[:12]}): {result.agent_file}")
    for key, value in result.changes.items():
        print(f"  {key}: {value}")
    for note in result.notes:
        print(f"note: {note}")
    if result.pull_request:
        print(f"pull request: {result.pull_request}")
    return EXIT_OK


# --------------------------------------------------------------------------- import


def cmd_import(args: argparse.Namespace) -> int:
    from bench_pipeline.importer import import_manifest

    out = import_manifest(args.manifest, args.factory, args.suite)
    launch = out["launch"]
    print(
        f"imported suite {out['suite']}: {len(launch.tasks)} tasks, "
        f"{len(launch.configs)} configs x {launch.repetitions} reps into {out['factory']}"
    )
    print(f"launch: {Path(out['factory']) / 'launches' / (out['suite'] + '.yaml')}")
    for agent in out["agents"]:
        print(f"agent:  agents/{agent}.yaml")
    print(f"next: bench validate {out['factory']} --reference")
    return EXIT_OK


# --------------------------------------------------------------------------- tasks from-commit


def cmd_from_commit(args: argparse.Namespace) -> int:
    from bench_pipeline.from_commit import draft_from_commit

    d = draft_from_commit(args.repo, args.sha, args.factory, args.suite, args.id, args.agent)
    print(f"drafted task {d.suite}/{d.task_id} from {args.sha} (base {d.base_sha[:12]})")
    print(f"  task:      {d.task_file}")
    print(f"  reference: {d.reference}")
    print(f"  tests:     {', '.join(d.tests)} (run with {d.runner})")
    for note in d.notes:
        print(f"note: {note}")
    print(
        f"next: edit the prompt, then `bench validate {Path(args.factory).absolute()} --reference`"
    )
    return EXIT_OK


# --------------------------------------------------------------------------- cancel


def cmd_cancel(args: argparse.Namespace) -> int:
    from bench_pipeline.cancel import cancel_run, render
    from bench_pipeline.runstate import RUNNING, status_of

    paths = _paths(args)
    if not paths.warehouse.exists(f"manifests/{args.run}.json"):
        raise CliError(f"RUN: no benchmark run '{args.run}' in {paths.warehouse.root}")
    status = (status_of(paths.warehouse, args.run) or {}).get("status")
    if status != RUNNING:
        print(f"run {args.run} is not running (status {status or 'unknown'}); nothing to cancel")
        return EXIT_OK
    print(f"cancelling {args.run} ...", file=sys.stderr)
    report = cancel_run(paths.warehouse, paths.cancel_flag(args.run), args.run, args.wait)
    if args.json:
        _print_json(report.__dict__)
    else:
        print(render(report))
    if not report.stopped:
        print(
            f"still running after {args.wait:g} s; the cancel flag stays, so its trials stop "
            "at their next check",
            file=sys.stderr,
        )
        return EXIT_FAILED
    print(f"resume it with `bench run --resume {args.run}`", file=sys.stderr)
    return EXIT_OK


# --------------------------------------------------------------------------- registration


def register(add: Callable[..., argparse.ArgumentParser]) -> None:
    r = add(
        "rescore",
        cmd_rescore,
        "grade a finished run again without rerunning agents (default: only unscored cells)",
    )
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

    c = add(
        "calibrate-judge",
        cmd_calibrate,
        "agreement of the judge with human labels (accuracy, Cohen's kappa, confusion)",
    )
    c.add_argument("--rubric", help="grading guidance file appended to the rubric prompt")
    c.add_argument("--dataset", required=True, help="labelled items JSON (see data/calibration)")
    c.add_argument("--launch", help="take the judge (and prices) from this launch's judge block")
    c.add_argument("--factory", help="factory whose prices.yaml prices the judge calls")
    c.add_argument("--model", help="judge model (default: the launch's, else claude-sonnet-4-5)")
    c.add_argument("--effort", choices=["low", "medium", "high"])
    c.add_argument("--base-url", help="Messages API base URL (a proxy or test server)")
    c.add_argument("--api-key-env", help="variable holding the API key (default ANTHROPIC_API_KEY)")
    c.add_argument("--json", action="store_true")

    p = add(
        "promote",
        cmd_promote,
        "write a config's model/effort/skills into its agent file on a new branch (and open a PR)",
    )
    p.add_argument("run", metavar="RUN")
    p.add_argument("config", metavar="CONFIG")
    p.add_argument("--tag", help="also put this tag's results in the commit message")

    i = add(
        "import", cmd_import, "convert a Yard-style manifest (schema_version 1) to a suite + launch"
    )
    i.add_argument("manifest")
    i.add_argument("--factory", default=".", help="factory folder (default .; created if missing)")
    i.add_argument("--suite", help="suite name (default: the manifest's name, else its file name)")

    t = add("tasks", lambda a: EXIT_OK, "author tasks")
    tsub = t.add_subparsers(dest="tasks_command", required=True, metavar="ACTION")
    fc = tsub.add_parser(
        "from-commit",
        help="draft a task from a past commit: base = parent, reference = its non-test change",
        description="draft a task from a past commit: base = parent, reference = its non-test "
        "change, check = the tests it touched",
    )
    fc.set_defaults(fn=cmd_from_commit)
    fc.add_argument("repo", metavar="REPO")
    fc.add_argument("sha", metavar="SHA")
    fc.add_argument("--suite", required=True)
    fc.add_argument("--id", help="task id (default: from the commit subject)")
    fc.add_argument("--factory", default=".", help="factory folder (default .)")
    fc.add_argument("--agent", help="agent of a new suite (default: the factory's first agent)")

    x = add("cancel", cmd_cancel, "stop a running benchmark run; finished trials are kept")
    x.add_argument("run", metavar="RUN")
    x.add_argument("--wait", type=float, default=120.0, help="seconds to wait for it to stop")
    x.add_argument("--json", action="store_true")
