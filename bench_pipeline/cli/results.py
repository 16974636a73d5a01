"""`bench results`, `report`, `baseline`, `compare`: read what runs produced."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from bench_pipeline.cli import common
from bench_pipeline.cli.ui import installed_script
from bench_pipeline.runs.benchmark_run import run_exists


def show_results(
    args: argparse.Namespace,
    paths: Any,
    run_id: str,
    fail_on_error: bool = False,
    fail_on_regression: bool = False,
) -> int:
    from bench_pipeline.cli.format import (
        render_config_table,
        render_failed_checks,
        render_recommendations,
        render_regressions,
        render_unscored,
    )
    from bench_pipeline.formats.vocabulary import FAILED_OUTCOMES
    from bench_pipeline.results.verdicts import COST_COVERAGE, REGRESSION_TOLERANCE
    from bench_pipeline.runs.derived import (
        compute_derived,
        load_derived,
        per_trial_results,
        pinned_baseline,
        result_verdicts,
    )
    from bench_pipeline.runs.status import isolation_summary, progress_note
    from bench_pipeline.runs.unscored import unscored
    from bench_pipeline.warehouse.columns import read_columns

    baseline = getattr(args, "baseline", None)
    if baseline not in (None, "none") and not run_exists(paths.warehouse, baseline):
        raise common.CliError(
            f"--baseline: no benchmark run '{baseline}' in {paths.warehouse.root}; "
            "see `bench results --list`, or give 'none' for no baseline"
        )
    derived = load_derived(paths.warehouse, run_id) if baseline is None else None
    if derived is None:
        derived = compute_derived(
            paths.warehouse,
            run_id,
            baseline_run_id=None if baseline in (None, "none") else baseline,
            use_pinned_baseline=baseline != "none",
        )
    running = progress_note(paths.warehouse, run_id, derived.run.launch.trial_count)
    notes = [running, *derived.notes] if running else list(derived.notes)
    table = derived.tables["config_table"]
    # (the latest row of each trial, as the tables count them: the per-trial cache the
    # analysis left, not a read of every trial row and column)
    found = per_trial_results(paths.warehouse, run_id)
    per_trial = found[0] if found is not None else None
    failed = 0 if per_trial is None else int(per_trial["outcome"].isin(FAILED_OUTCOMES).sum())
    unscored_cells = unscored(paths.warehouse, run_id, table, per_trial)
    regressions = derived.tables["regressions"]
    out_file = getattr(args, "out", None)
    checks = [v.as_dict() for v in result_verdicts(paths.warehouse, derived, per_trial)]
    isolation = read_columns(
        paths.warehouse, "trials", run_id, ISOLATION_READ, categorical=ISOLATION_READ
    )
    payload = {
        "run": {**derived.meta(), **({"progress": running} if running else {})},
        "config_table": common.records(table),
        "recommendations": derived.recommendations,
        "checks": checks,
        "isolation": isolation_summary(isolation),
        "unscored": common.records(unscored_cells),
        "regressions": common.records(regressions),
    }
    if getattr(args, "by_tag", False):
        payload["by_tag"] = common.records(derived.tables["config_table_by_tag"])
        payload["recommendations_by_tag"] = common.records(derived.tables["recommendations_by_tag"])
    if out_file:
        common.write_output_file(out_file, json.dumps(payload, indent=2, default=str))
    if getattr(args, "json", False):
        common.print_json(payload)
    else:
        meta = derived.meta()
        print(
            f"\nRun {run_id}  suite {meta['suite']}  task set {meta['task_set_revision']}  baseline {meta['baseline_run']}"
        )
        for note in notes:
            print(f"note: {note}")
        for row in payload["isolation"]:
            print(render_isolation(row))
        print()
        print(render_config_table(table))
        for block in (
            render_unscored(unscored_cells, table, run_id),
            render_regressions(regressions, derived.baseline_run_id),
            # (the unknown-cost block and the baseline's say these two in their own words)
            render_failed_checks(checks, (COST_COVERAGE, REGRESSION_TOLERANCE)),
        ):
            if block:
                print("\n" + block)
        print("\nRecommendations:")
        print(render_recommendations(derived.recommendations))
        if getattr(args, "by_tag", False):
            print()
            for tag, part in derived.tables["config_table_by_tag"].groupby("tag", sort=True):
                print(f"\nTag {tag}:")
                print(render_config_table(part))
        print(
            f"\nQuery it: {shown_path(installed_script('duckdb'))} {shown_path(paths.warehouse.duckdb_path)}"
        )
    if fail_on_error and failed:
        print(f"{failed} trial(s) failed (agent error, timeout or budget)", file=sys.stderr)
        return common.EXIT_FAILED
    if fail_on_regression and baseline != "none" and derived.baseline_run_id is None:
        # A gate that compared nothing must not pass: a task set bumped since the baseline was
        # pinned would otherwise turn a nightly job green for good.
        suite = derived.run.suite
        pinned = pinned_baseline(paths.warehouse, suite)
        if pinned != run_id:  # (the baseline itself has nothing to regress from)
            why = derived.baseline_note or next(
                (n for n in derived.notes if n.startswith("baseline ")),
                f"suite {suite} has no pinned baseline",
            )
            print(
                f"--fail-on-regression: nothing compared: {why}; pin a run of this task set "
                f"with `bench baseline set {suite} RUN`, or give --baseline none",
                file=sys.stderr,
            )
            return common.EXIT_FAILED
    regressed = [c for c in checks if c["check"] == REGRESSION_TOLERANCE and not c["passed"]]
    if fail_on_regression and regressed:
        print(
            f"{regressed[0]['regressions']} regression(s) against baseline "
            f"{derived.baseline_run_id}",
            file=sys.stderr,
        )
        return common.EXIT_FAILED
    return common.EXIT_OK


# What `bench results` shows of the trial rows besides the tables: their isolation per config.
ISOLATION_READ = ("config_id", "isolation", "network")


def cmd_results(args: argparse.Namespace) -> int:
    """The config table and recommendations of a run (default: the latest)."""

    paths = common.paths_of(args)
    if args.out:  # (before the tables are computed, as `bench run --out` before its trials)
        common.check_output_file(args.out, "--out")
    if args.list:
        return list_runs(args, paths)
    return show_results(
        args,
        paths,
        common.run_id_of(args, paths),
        fail_on_error=args.fail_on_error,
        fail_on_regression=args.fail_on_regression,
    )


def list_runs(args: argparse.Namespace, paths: Any) -> int:
    """`bench results --list`: every run with its status; a run whose files cannot be read is
    listed as such and the file named on stderr, the others as usual."""
    from bench_pipeline.runs.status import run_statuses

    runs = paths.warehouse.read_runs().sort_values("created_at")
    unreadable: list[Exception] = []
    statuses = run_statuses(paths.warehouse, [str(r) for r in runs["run_id"]], unreadable)
    listed = [
        {
            "run_id": r.run_id,
            "suite": r.suite,
            "launch": r.launch,
            "created_at": r.created_at,
            "task_set_revision": r.task_set_revision,
            "status": statuses.get(r.run_id, "unknown"),
        }
        for r in runs.itertuples()
    ]
    if getattr(args, "json", False):
        common.print_json([{**r, "created_at": r["created_at"].isoformat()} for r in listed])
    else:
        for r in listed:
            print(
                f"{r['run_id']}  {r['suite']}  {r['launch']}  {r['created_at']}  "
                f"task set {r['task_set_revision']}  {r['status']}"
            )
    for exc in unreadable:
        print(f"warning: {exc}", file=sys.stderr)
    return common.EXIT_OK


def cmd_report(args: argparse.Namespace) -> int:
    """Write the results explorer of a run: one self-contained, offline HTML file."""

    from bench_pipeline.runs.report import report_html

    paths = common.paths_of(args)
    run_id = common.run_id_of(args, paths)
    out = common.check_output_file(args.out or f"{run_id}-report.html", "--out")
    html = report_html(paths.warehouse, run_id)
    common.write_output_file(out, html)
    print(shown_path(out))
    return common.EXIT_OK


def cmd_baseline(args: argparse.Namespace) -> int:
    """Pin (set) or show a suite's baseline run."""

    from bench_pipeline.runs.derived import pinned_baseline

    paths = common.paths_of(args)
    if args.action == "show":
        print(pinned_baseline(paths.warehouse, args.suite) or "none")
        return common.EXIT_OK
    from bench_pipeline.runs.baseline import BaselineError, set_baseline

    try:
        set_baseline(paths.warehouse, args.suite, args.run_id or "")
    except BaselineError as exc:
        raise common.CliError(str(exc)) from None
    print(f"baseline of {args.suite} is now {args.run_id}")
    return common.EXIT_OK


def cmd_compare(args: argparse.Namespace) -> int:
    """Paired comparison of a run's configs against a config or another run."""

    from bench_pipeline.runs.compare import compare_command

    paths = common.paths_of(args)
    run_id = common.run_id_of(args, paths)
    result = compare_command(paths.warehouse, run_id, args.against, args.candidate)
    if args.json:
        common.print_json(result)
    else:
        from bench_pipeline.cli.format import render_comparison

        print(render_comparison(result))
    return common.EXIT_OK


def register(add: common.AddCommand) -> None:
    res = add("results", cmd_results)
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
    res.add_argument(
        "--fail-on-regression",
        action="store_true",
        help="exit 1 when a config regressed against the baseline, or nothing was compared",
    )

    rep = add("report", cmd_report)
    rep.add_argument("run", nargs="?")
    rep.add_argument("--out", help="file to write (default <run>-report.html)")

    b = add("baseline", cmd_baseline)
    b.add_argument("action", choices=["set", "show"])
    b.add_argument("suite")
    b.add_argument("run_id", nargs="?", metavar="RUN")

    c = add("compare", cmd_compare)
    c.add_argument("run", nargs="?")
    c.add_argument(
        "--against",
        help="baseline: a config id of the run, or another run id (default: the baseline config)",
    )
    c.add_argument("--candidate", help="only this config")
    c.add_argument("--json", action="store_true")


def shown_path(path: str | Path) -> str:
    """A path as the user would type it: relative to the current folder when inside it."""
    path = Path(path)
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def render_isolation(row: dict[str, Any]) -> str:
    """One line per configuration: how its trials ran, and the fallback's gaps by name."""
    line = (
        f"isolation: {row['config_id']}: {row['isolation']} (network {row['network']}, "
        f"{row['trials']} trials)"
    )
    if row["not_guaranteed"]:
        line += f" — not guaranteed: {'; '.join(row['gaps'])}"
    return line
